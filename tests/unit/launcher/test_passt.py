"""The passt binding: the launcher's passt processes (started before QEMU, listening on
their sockets, stopped with the domain), the plan's passt interfaces, the launcher pod's
sysctls, the VMI's LiveMigratable condition and the address a migration target keeps."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from controller.config import TemplateConfig
from controller.services.template import TemplateService
from handler.status import live_migratable
from launcher.errors import LibvirtFailure
from launcher.nicplan import passt_interfaces
from launcher.passt import Passt, PasstInterface, argv, guest_mac, pci_slot
from shared.model import VirtualMachineInstance
from tests.unit.controller.builders import make_vmi, vmi_dict
from tests.unit.controller.services.test_template import IMAGE

# Stands in for passt: binds --socket (as passt does once set up), then waits.
FAKE = """#!{python}
import os, signal, socket, sys, time
args = sys.argv[1:]
if "--fail" in " ".join(args):
    print("Failed to bind any port for '-t 7', exiting", file=sys.stderr); sys.exit(1)
s = socket.socket(socket.AF_UNIX); s.bind(args[args.index("--socket") + 1]); s.listen()
if "--die" in " ".join(args):  # as passt's own seccomp filter would end it
    print("You can now start qemu", file=sys.stderr, flush=True); os.kill(os.getpid(), signal.SIGSYS)
time.sleep(60)
"""


def _passt_vmi() -> dict[str, Any]:
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"]["interfaces"] = [
        {"name": "default", "passtBinding": {}, "ports": [{"port": 7}]}
    ]
    raw["spec"]["networks"] = [{"name": "default", "pod": {}}]
    return raw


@pytest.fixture
def fake_passt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "passt").write_text(FAKE.format(python=sys.executable))
    (bin_dir / "passt").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


async def test_passt_listens_before_qemu_and_stops_with_the_domain(
    tmp_path: Path, fake_passt: None
) -> None:
    """start returns once passt's socket exists; a second start keeps the running one;
    stop ends it. A passt that exits says why, naming the interface."""
    iface = PasstInterface(alias="default", socket=tmp_path / "p.sock", mac=guest_mac("u", "d"))
    passt = Passt(relay=False)
    await passt.start([iface])
    assert iface.socket.exists()
    await passt.start([iface])
    await passt.stop()
    bad = PasstInterface(alias="bad", socket=tmp_path / "--fail.sock", mac="02:00:00:00:00:02")
    with pytest.raises(
        LibvirtFailure,
        match=r"interface bad: passt did not start \(exited with status 1\): Failed to bind",
    ):
        await Passt(relay=False).start([bad])


async def test_a_passt_gone_after_listening_says_how_it_ended(
    tmp_path: Path, fake_passt: None
) -> None:
    """A passt that listened and then ended is reported with its signal and its log's last
    line (said beside a domain QEMU could not start); a running one is not reported."""
    passt = Passt(relay=False)
    running = PasstInterface(alias="ok", socket=tmp_path / "ok.sock", mac="02:00:00:00:00:03")
    await passt.start([running])
    dying = PasstInterface(alias="gone", socket=tmp_path / "--die.sock", mac="02:00:00:00:00:04")
    await passt.start([dying])
    async with asyncio.timeout(10):
        while not (said := passt.exited()):  # noqa: ASYNC110 (a child exiting: no event)
            await asyncio.sleep(0.01)
    assert said == "passt of interface gone killed by SIGSYS: You can now start qemu"
    await passt.stop()


def test_plan_pod_and_migratability_of_a_passt_vmi(tmp_path: Path) -> None:
    """The plan gives each passt interface a socket beside QEMU's, a stable MAC for the
    guest and one for passt; the launcher pod may bind low ports and open ping sockets; the
    VMI is live-migratable (KubeVirt 1.8)."""
    vmi = VirtualMachineInstance.from_dict(_passt_vmi())
    (iface,) = passt_interfaces(vmi, socket_dir=tmp_path)
    assert iface.socket == tmp_path / "passt-default.sock"
    assert iface.mac == guest_mac(vmi.metadata.uid or "", "default")
    assert iface.own_mac == guest_mac(vmi.metadata.uid or "", "default/passt") != iface.mac
    assert iface.forwards == (("tcp", (7,)),)
    assert iface.guest_addresses == ()
    pod = TemplateService(TemplateConfig(launcher_image=IMAGE)).launcher_pod(
        make_vmi(raw=_passt_vmi())
    )
    sysctls = {s["name"]: s["value"] for s in pod["spec"]["securityContext"]["sysctls"]}
    assert sysctls == {
        "net.ipv4.ping_group_range": "0 2147483647",
        "net.ipv4.ip_unprivileged_port_start": "0",
    }
    assert live_migratable(vmi).status == "True"


def test_a_migration_target_keeps_the_guests_address(tmp_path: Path) -> None:
    """On a migration target each passt is told the addresses the VMI's status holds (the
    first pod's IPs, one per family, which the guest keeps) and passt's own stable MAC; a
    first start leaves the addresses to passt's defaults but not the MAC. A status with
    only ipAddress (single-stack) gives that one."""
    raw = _passt_vmi()
    raw["status"] = {"interfaces": [{
        "name": "default", "ipAddress": "198.18.1.7",
        "ipAddresses": ["198.18.1.7", "fd0d:4a03:aeea:1::7", "fd0d:4a03:aeea:1::8"],
    }]}  # fmt: skip
    vmi = VirtualMachineInstance.from_dict(raw)
    (target,) = passt_interfaces(vmi, socket_dir=tmp_path, keep_addresses=True)
    assert target.guest_addresses == ("198.18.1.7", "fd0d:4a03:aeea:1::7")
    args = argv(target)
    assert [args[i + 1] for i, a in enumerate(args) if a == "--address"] == [
        "198.18.1.7", "fd0d:4a03:aeea:1::7"]  # fmt: skip
    assert args[args.index("--mac-addr") + 1] == target.own_mac
    (first,) = passt_interfaces(vmi, socket_dir=tmp_path)
    assert "--address" not in argv(first) and "--mac-addr" in argv(first)
    raw["status"] = {"interfaces": [{"name": "default", "ipAddress": "198.18.1.7"}]}
    vmi = VirtualMachineInstance.from_dict(raw)
    (single,) = passt_interfaces(vmi, socket_dir=tmp_path, keep_addresses=True)
    assert single.guest_addresses == ("198.18.1.7",)


def test_passt_devices_sit_on_slots_libvirt_leaves_free() -> None:
    """The passt NICs (not libvirt devices) take root-bus slots from the top down, under
    q35's chipset slots there, so libvirt's own devices (VGA on pc's slot 2) keep theirs."""
    assert pci_slot("pc", 0) == "bus=pci.0,addr=0x1f"
    assert pci_slot("pc-i440fx-7.2", 1) == "bus=pci.0,addr=0x1e"
    assert pci_slot("q35", 0) == "bus=pcie.0,addr=0x18"
