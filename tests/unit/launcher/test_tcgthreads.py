"""vCPU hotplug under TCG: a domain with room for more vCPUs runs QEMU through the wrapper
that asks for single-threaded TCG (launcher/tcgthreads.py), the wrapper rewrites only
libvirt's `-accel tcg…`, a migration's destination uses the target's wrapper, and libvirt's
thread-id complaint after such a hot-add is not a failure."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from launcher import domxml, tcgthreads
from launcher.errors import LibvirtFailure
from launcher.migxml import destination_xml
from launcher.plan import HostPaths, emulator
from launcher.resources import Resources
from shared.wire.resources import HotplugResourcesArgs
from tests.unit.launcher.test_resources import HOT, FakeVirt, plan, vmi

WRAPPER = Path("/p/qemu-tcg-single")
HOST = HostPaths(
    serial_log=Path("/s"), console_socket=Path("/c"), agent_socket=Path("/a"),
    partition=None, tcg_single_emulator=WRAPPER,
)  # fmt: skip


@pytest.mark.parametrize(
    ("spec", "virt_type", "host", "want"),
    [
        pytest.param(HOT, "qemu", HOST, WRAPPER, id="tcg-room-to-grow"),
        pytest.param(HOT, "kvm", HOST, tcgthreads.QEMU, id="kvm"),
        pytest.param(
            vmi({"sockets": 2, "maxSockets": 2}, {"guest": "1Gi"}),
            "qemu",
            HOST,
            tcgthreads.QEMU,
            id="tcg-no-room",
        ),
        pytest.param(
            vmi({"sockets": 1}, {"guest": "1Gi"}),
            "qemu",
            HOST,
            tcgthreads.QEMU,
            id="tcg-no-max-sockets",
        ),
        pytest.param(
            HOT,
            "qemu",
            HostPaths(
                serial_log=Path("/s"),
                console_socket=Path("/c"),
                agent_socket=Path("/a"),
                partition=None,
            ),
            tcgthreads.QEMU,
            id="no-wrapper-written",
        ),
    ],
)
def test_emulator_is_the_wrapper_only_under_tcg_with_room(
    spec: Any, virt_type: str, host: HostPaths, want: Path
) -> None:
    """Only an emulated domain that may gain vCPUs (maxSockets above sockets) gets the
    wrapper; KVM domains and domains without room keep QEMU (and multi-threaded TCG)."""
    assert emulator(spec, host=host, virt_type=virt_type) == want


def test_the_domain_xml_names_the_wrapper_as_its_emulator() -> None:
    """The plan's emulator is the domain's <devices><emulator>."""
    root = ET.fromstring(domxml.build(dataclasses.replace(plan(HOT), emulator=WRAPPER)))
    assert root.findtext("devices/emulator") == str(WRAPPER)
    assert root.findtext("features/tcg/tb-cache") == "32"  # libvirt's -accel as before


def _argv_through_wrapper(tmp_path: Path, args: list[str]) -> list[str]:
    fake = tmp_path / "fake-qemu"
    fake.write_text('#!/bin/sh\nfor a do printf "%s\\n" "$a"; done\n')
    fake.chmod(0o755)
    wrapper = tcgthreads.write_wrapper(tmp_path, qemu=fake)
    assert wrapper.stat().st_mode & 0o777 == 0o755
    out = subprocess.run([str(wrapper), *args], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


@pytest.mark.parametrize(
    ("accel", "want"),
    [
        ("tcg,tb-size=32", "tcg,tb-size=32,thread=single"),
        ("tcg", "tcg,thread=single"),
        ("kvm", "kvm"),
    ],
)
def test_the_wrapper_adds_thread_single_to_the_tcg_accel(
    tmp_path: Path, accel: str, want: str
) -> None:
    """`-accel tcg[,…]` gains `,thread=single`; every other argument (spaces, quotes, an
    `-accel kvm`, libvirt's capability probe's `-machine none,accel=kvm:tcg`) is passed on
    unchanged and in order."""
    args = ["-name", "guest=a b,debug-threads=on", "-accel", accel, "-machine",
            "none,accel=kvm:tcg", "-append", "console=ttyS0 'x'", "tcg"]  # fmt: skip
    out = _argv_through_wrapper(tmp_path, args)
    assert out == [*args[:3], want, *args[4:]]


def test_a_migration_destination_runs_the_targets_wrapper() -> None:
    """The destination XML (the source's live XML) takes the target's <emulator>: each
    launcher writes its wrapper in its own private dir."""
    src = domxml.build(plan(HOT)).replace(str(tcgthreads.QEMU), "/src/qemu-tcg-single")
    tgt = domxml.build(plan(HOT)).replace(str(tcgthreads.QEMU), "/dst/qemu-tcg-single")
    out = ET.fromstring(destination_xml(src, tgt))
    assert out.findtext("devices/emulator") == "/dst/qemu-tcg-single"


class TidVirt(FakeVirt):
    """libvirt as under single-threaded TCG: the vCPU goes in, then setVcpus complains."""

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    async def set_vcpus(self, name: str, count: int) -> None:
        await super().set_vcpus(name, count)
        raise LibvirtFailure(self.message)


async def test_the_thread_id_complaint_after_a_hot_add_is_not_a_failure() -> None:
    """libvirt cannot tell the vCPUs' thread ids apart when they share one thread and
    says so after adding the vCPU; the reply is the live XML (2 vCPUs)."""
    virt = TidVirt("libvirt_error: internal error: qemu didn't report thread id for vcpu '2'")
    reply = await Resources(virt=virt, domain=lambda: "n_a").apply(HotplugResourcesArgs(vcpus=2))
    assert virt.calls == [("set_vcpus", 2)]
    assert reply.vcpus == 2


async def test_other_libvirt_failures_of_a_hot_add_still_fail() -> None:
    """Any other setVcpus error reaches the caller."""
    virt = TidVirt("libvirt_error: operation failed: vcpu hotplug failed")
    with pytest.raises(LibvirtFailure):
        await Resources(virt=virt, domain=lambda: "n_a").apply(HotplugResourcesArgs(vcpus=2))


def test_the_wrappers_capabilities_are_seeded_from_qemus(tmp_path: Path) -> None:
    """libvirt's cache entry for the wrapper is QEMU's with the wrapper's path and ctime
    (libvirt names entries by the path's SHA-256), so no second probe; without QEMU's
    entry nothing is written."""
    wrapper = tcgthreads.write_wrapper(tmp_path / "private")
    cache = tmp_path / "caps"
    cache.mkdir()
    assert not tcgthreads.seed_capabilities(cache, wrapper)
    assert list(cache.iterdir()) == []
    qemu_entry = cache / f"{hashlib.sha256(str(tcgthreads.QEMU).encode()).hexdigest()}.xml"
    qemu_entry.write_text(
        f"<qemuCaps>\n  <emulator>{tcgthreads.QEMU}</emulator>\n  <qemuctime>17</qemuctime>\n"
        "  <qemumoddirmtime>17</qemumoddirmtime>\n  <flag name='kvm'/>\n</qemuCaps>\n"
    )
    assert tcgthreads.seed_capabilities(cache, wrapper)
    entry = cache / f"{hashlib.sha256(str(wrapper).encode()).hexdigest()}.xml"
    root = ET.fromstring(entry.read_text())
    assert root.findtext("emulator") == str(wrapper)
    assert root.findtext("qemuctime") == str(int(wrapper.stat().st_ctime))
    assert root.findtext("qemumoddirmtime") == "17"
    assert root.find("flag") is not None
