"""A running VM's non-hotpluggable volume changes need a restart: removing one (an "eject"
of a disk or cdrom that was not hot-plugged), adding or changing one sets RestartRequired
naming the volume and why; hotpluggable ones follow live and are no such change."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from controller.vm.liveupdate import with_restart_required
from controller.vm.volumechange import restart_volumes
from shared.clusterconfig import RolloutStrategy
from shared.model import VirtualMachine, VirtualMachineInstance

NOW = datetime(2026, 11, 29, tzinfo=UTC)
ISO = {"name": "cd", "containerDisk": {"image": "registry.local/iso:v1"}}
ROOT = {"name": "root", "persistentVolumeClaim": {"claimName": "root"}}
MEDIA = {"name": "cd", "persistentVolumeClaim": {"claimName": "iso", "hotpluggable": True}}
CDROM = {"name": "cd", "cdrom": {"bus": "sata"}}
DISK = {"name": "root", "disk": {"bus": "virtio"}}


def _spec(*volumes: dict[str, Any]) -> dict[str, Any]:
    return {"domain": {"devices": {"disks": [DISK, CDROM]}}, "volumes": list(volumes)}


def _vm(*volumes: dict[str, Any]) -> VirtualMachine:
    return VirtualMachine.from_dict(
        {"metadata": {"name": "a"}, "spec": {"template": {"spec": _spec(*volumes)}}}
    )


def _vmi(*volumes: dict[str, Any]) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict(
        {"metadata": {"name": "a"}, "spec": _spec(*volumes), "status": {"phase": "Running"}}
    )


def test_ejecting_media_that_was_not_hotplugged_needs_a_restart() -> None:
    """The volume of a cdrom that is not hotpluggable dropped from the template: the VM's
    RestartRequired names it, says it is not hotpluggable and what is ejected live."""
    status = with_restart_required(
        _vm(ROOT).status, _vm(ROOT), _vmi(ROOT, ISO),
        strategy=RolloutStrategy.LIVE_UPDATE, now=NOW,
    )  # fmt: skip
    (condition,) = status.conditions
    assert (condition.type, condition.status) == ("RestartRequired", "True")
    assert (
        "spec.volumes[name=cd]: cdrom media 'cd' removed, but it is not hotpluggable "
        "(only a hotpluggable volume is ejected or unplugged live)"
    ) in (condition.message or "")


def test_added_or_changed_volumes_that_are_not_hotpluggable_are_named() -> None:
    """Added, or pointed at another claim, without hotpluggable: each named."""
    other = {"name": "root", "persistentVolumeClaim": {"claimName": "other"}}
    assert restart_volumes(_vm(ROOT, ISO), _vmi(ROOT)) == [
        "spec.volumes[name=cd]: volume 'cd' added, but it is not hotpluggable"
    ]
    assert restart_volumes(_vm(other), _vmi(ROOT)) == [
        "spec.volumes[name=root]: volume 'root' changed, but it is not hotpluggable"
    ]


def test_hotpluggable_media_and_unchanged_volumes_are_no_restart() -> None:
    """A hotpluggable cdrom volume inserted or ejected, and the same volumes: nothing."""
    assert restart_volumes(_vm(ROOT, MEDIA), _vmi(ROOT)) == []
    assert restart_volumes(_vm(ROOT), _vmi(ROOT, MEDIA)) == []
    assert restart_volumes(_vm(ROOT, ISO), _vmi(ROOT, ISO)) == []


def test_a_claim_moved_under_the_migration_strategy_is_no_restart() -> None:
    """With updateVolumesStrategy: Migration a claim volume pointed at another claim is
    volume migration's to copy live, not a restart; a changed non-claim volume still is."""
    other = {"name": "root", "persistentVolumeClaim": {"claimName": "other"}}
    vm = _vm(other)
    migrating = VirtualMachine.from_dict(
        {**vm.to_dict(), "spec": {**vm.to_dict()["spec"], "updateVolumesStrategy": "Migration"}}
    )
    assert restart_volumes(migrating, _vmi(ROOT)) == []
    iso2 = {"name": "cd", "containerDisk": {"image": "registry.local/iso:v2"}}
    vm2 = _vm(ROOT, iso2)
    migrating2 = VirtualMachine.from_dict(
        {**vm2.to_dict(), "spec": {**vm2.to_dict()["spec"], "updateVolumesStrategy": "Migration"}}
    )
    assert restart_volumes(migrating2, _vmi(ROOT, ISO)) == [
        "spec.volumes[name=cd]: volume 'cd' changed, but it is not hotpluggable"
    ]
