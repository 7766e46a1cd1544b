"""Which volumes of a VMI a pending volume migration copies to new claims: read by the
source handler (the launcher's `migrate` copies them), the handler's LiveMigratable (their
source claims need not be shared) and the target launcher (it makes their disks)."""

from __future__ import annotations

from shared.model import VirtualMachineInstance, VMIConditionType


def migrated_volumes(vmi: VirtualMachineInstance) -> frozenset[str]:
    """The names of the volumes being migrated: empty unless VolumesChange=True, and only
    those whose spec already names the destination claim (before that, a target pod
    would mount the source claim: copying it onto itself must never happen)."""
    if not vmi.status.condition_is_true(VMIConditionType.VOLUMES_CHANGE):
        return frozenset()
    claims = {v.name: v.claim.claim_name for v in vmi.spec.volumes if v.claim is not None}
    return frozenset(
        v.volume_name
        for v in vmi.status.migrated_volumes
        if v.volume_name
        and v.destination_claim
        and claims.get(v.volume_name) == v.destination_claim
    )
