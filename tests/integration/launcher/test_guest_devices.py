"""Guest devices, clock and features against a real launcher's libvirtd: KubeVirt's
vmi-windows example (Hyper-V enlightenments, Hyper-V clock, timers) renders to a domain
libvirt defines and keeps (no boot: that needs a Windows image, and KVM); the same VMI sent
to the launcher on this emulating host is refused with a typed error naming the fields,
and no domain is defined."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from launcher.domxml import build
from launcher.guestplan import guest_extras
from shared.model import VirtualMachineInstance
from shared.wire.errors import CommandFailed
from shared.wire.launcher_api import Method
from tests.integration.launcher.harness import Launcher, call, tiny_vmi
from tests.unit.launcher.test_domxml import PLAN
from tests.unit.shared.test_validate_devices import WINDOWS_EXAMPLE

pytestmark = pytest.mark.integration


async def test_vmi_windows_domain_is_defined_by_libvirt(idle: Launcher, tmp_path: Path) -> None:
    """The launcher's XML for vmi-windows (as a qemu-type domain: this host has no KVM)
    is defined by libvirt 9.0 and read back with every Hyper-V setting and timer."""
    vmi = VirtualMachineInstance.from_dict(yaml.safe_load(WINDOWS_EXAMPLE))
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
        "<clock offset='utc'>", "<apic/>",
    ):  # fmt: skip
        assert expected in xml, (expected, xml)


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
