"""Guest devices, clock and features against a real launcher's libvirtd: KubeVirt's
vmi-windows example (Hyper-V enlightenments with tlbflush's direct and extended modes,
Hyper-V clock, timers) renders to a domain libvirt defines and keeps (no boot: that needs a
Windows image, and KVM), tlbflush's modes reach QEMU's vCPU; the same VMI sent
to the launcher on this emulating host is refused with a typed error naming the fields,
and no domain is defined."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from launcher.domxml import build
from launcher.guestplan import guest_extras
from launcher.guestxml import FeaturesPlan, GuestExtras
from shared.model import VirtualMachineInstance
from shared.wire.errors import CommandFailed
from shared.wire.launcher_api import Method
from tests.integration.launcher.harness import Launcher, call, tiny_vmi
from tests.unit.launcher.test_domxml import PLAN
from tests.unit.shared.test_validate_devices import WINDOWS_EXAMPLE

TLBFLUSH_MODES: dict[str, dict[str, bool]] = {"direct": {}, "extended": {}}

pytestmark = pytest.mark.integration


async def test_vmi_windows_domain_is_defined_by_libvirt(idle: Launcher, tmp_path: Path) -> None:
    """The launcher's XML for vmi-windows (as a qemu-type domain: this host has no KVM)
    is defined by libvirt 9.0 and read back with every Hyper-V setting and timer."""
    raw = yaml.safe_load(WINDOWS_EXAMPLE)
    raw["spec"]["domain"]["features"]["hyperv"]["tlbflush"] = TLBFLUSH_MODES
    vmi = VirtualMachineInstance.from_dict(raw)
    plan = dataclasses.replace(
        PLAN, name="default_vmi-windows", uuid="5d307ca9-b3ef-428c-8861-06e72d69f223",
        virt_type="qemu", extras=guest_extras(vmi),
    )  # fmt: skip
    path = tmp_path / "vmi-windows.xml"
    path.write_text(build(plan))
    idle.virsh("define", str(path))
    try:
        xml = idle.virsh("dumpxml", "--inactive", "default_vmi-windows").stdout
    finally:
        idle.virsh("undefine", "default_vmi-windows", check=False)
    for expected in (
        "<relaxed state='on'/>", "<vapic state='on'/>", "<spinlocks state='on' retries='8191'/>",
        "<timer name='hpet' present='no'/>", "<timer name='hypervclock' present='yes'/>",
        "<timer name='pit' tickpolicy='delay'/>", "<timer name='rtc' tickpolicy='catchup'/>",
        "<clock offset='utc'>", "<apic/>", "<tlbflush state='on'/>",
        "<qemu:arg value='x86_64-cpu.hv-tlbflush-direct=on'/>",
        "<qemu:arg value='x86_64-cpu.hv-tlbflush-ext=on'/>",
    ):  # fmt: skip
        assert expected in xml, (expected, xml)


async def test_tlbflush_cpu_properties_reach_qemu(idle: Launcher, tmp_path: Path) -> None:
    """tlbflush's direct and extended modes, as the launcher renders them (-global on the
    x86 CPU type), are set on the guest's vCPU in QEMU: a bare domain (no disks, no NIC)
    started paused in the launcher's libvirtd, its CPU read through QMP. (The Hyper-V
    enlightenments themselves need KVM; the properties are QEMU's either way.)"""
    features = FeaturesPlan(hyperv_cpu_properties=("hv-tlbflush-direct", "hv-tlbflush-ext"))
    plan = dataclasses.replace(
        PLAN, name="default_tlbflush", uuid="1b2c3d4e-0000-4000-8000-000000000001",
        kernel=None, disks=(), interfaces=(), partition=None, vnc_socket=None,
        serial_log=tmp_path / "serial.log", console_socket=tmp_path / "console.sock",
        agent_socket=tmp_path / "agent.sock",
        extras=GuestExtras(features=features, serial=False, memballoon=False),
    )  # fmt: skip
    path = tmp_path / "tlbflush.xml"
    path.write_text(build(plan))
    idle.virsh("create", str(path), "--paused")
    try:
        for prop in ("hv-tlbflush-direct", "hv-tlbflush-ext", "hv-tlbflush"):
            qom = {"path": "/machine/unattached/device[0]", "property": prop}
            command = json.dumps({"execute": "qom-get", "arguments": qom})
            out = idle.virsh("qemu-monitor-command", "default_tlbflush", command).stdout
            assert json.loads(out)["return"] is (prop != "hv-tlbflush"), (prop, out)
    finally:
        idle.virsh("destroy", "default_tlbflush", check=False)


async def test_kvm_only_settings_refused_by_the_launcher_under_tcg(idle: Launcher) -> None:
    """Sync of a VMI with Hyper-V settings on this TCG host: hypervisor_unsupported, the
    fields named, no domain defined."""
    vmi = tiny_vmi(name="idle")
    vmi["metadata"]["uid"] = idle.vmi["metadata"]["uid"]
    vmi["spec"]["domain"]["features"] = {"hyperv": {"relaxed": {}}}
    vmi["spec"]["domain"]["clock"] = {"timer": {"hyperv": {}}}
    with pytest.raises(CommandFailed) as info:
        await call(idle, Method.SYNC, {"vmi": vmi})
    assert info.value.code == "hypervisor_unsupported", info.value
    paths = [f["path"] for f in info.value.details["fields"]]
    assert paths == ["spec.domain.features.hyperv", "spec.domain.clock.timer.hyperv"]
    assert "TCG" in info.value.message
    listed = idle.virsh("list", "--all", "--name").stdout.strip()
    assert listed == ""
