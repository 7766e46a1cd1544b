"""Which volumes of a VMI a pending volume migration copies to new claims: read by the
source handler (the launcher's `migrate` copies them), the handler's LiveMigratable (their
source claims need not be shared) and the target launcher (it makes their disks)."""

from __future__ import annotations

from shared.model import VirtualMachineInstance, VMIConditionType


def migrated_volumes(vmi: VirtualMachineInstance) -> frozenset[str]:
    """The names of the volumes being migrated (empty unless VolumesChange=True)."""
    if not vmi.status.condition_is_true(VMIConditionType.VOLUMES_CHANGE):
        return frozenset()
    return frozenset(v.volume_name for v in vmi.status.migrated_volumes if v.volume_name)
