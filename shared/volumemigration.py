"""Which volumes of a VMI a pending volume migration copies to new claims: read by the
source handler (the launcher's `migrate` copies them), the handler's LiveMigratable (their
source claims need not be shared) and the target launcher (it makes their disks).

A decentralized migration (docs/migration.md) is a storage migration too: the receiving
VMI has claims of its own, so every claim volume of the guest is copied into the
receiving VMI's claim of the same volume name — on the source, once its migrationState
names another VMI as the target; on the target, while the receiving VMI waits for it."""

from __future__ import annotations

from shared.labels import RECEIVER_ANNOTATION
from shared.model import VirtualMachineInstance, VMIConditionType, VMIPhase

# The receiving VMI's phases before the guest arrived (controller/vmi/receiver.py).
_RECEIVER_WAITING = frozenset({VMIPhase.UNSET, VMIPhase.PENDING, VMIPhase.WAITING_FOR_SYNC})


def migrated_volumes(vmi: VirtualMachineInstance) -> frozenset[str]:
    """The names of the volumes being migrated: a decentralized migration's claims, else
    empty unless VolumesChange=True, and only those whose spec already names the
    destination claim (before that, a target pod would mount the source claim: copying
    it onto itself must never happen)."""
    if decentral := decentral_volumes(vmi):
        return decentral
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


def decentral_volumes(vmi: VirtualMachineInstance) -> frozenset[str]:
    """The claim volumes (persistentVolumeClaim, dataVolume; not hotplugged) a
    decentralized migration copies: those of a sending VMI handed off to another VMI, or
    of a receiving VMI still waiting for its guest; empty otherwise."""
    state = vmi.status.migration_state
    sending = bool(
        state is not None
        and not state.completed
        and not state.failed
        and state.leaves_vmi(vmi.namespace, vmi.name)
    )
    receiving = (
        vmi.metadata.annotations.get(RECEIVER_ANNOTATION) == "true"
        and vmi.status.phase_or_unset in _RECEIVER_WAITING
    )
    return claim_volumes(vmi) if sending or receiving else frozenset()


def claim_volumes(vmi: VirtualMachineInstance) -> frozenset[str]:
    """The VMI's claim volumes (persistentVolumeClaim, dataVolume) in its pod, by name."""
    return frozenset(
        v.name for v in vmi.spec.volumes if v.name and v.claim is not None and not v.is_hotplug
    )


def destination_claims(vmi: VirtualMachineInstance) -> frozenset[str]:
    """The claims a migration target of this VMI makes disks on (the controller passes
    their sizes to its pod): a volume migration's destination claims, a waiting receiving
    VMI's claims."""
    moved = {v.destination_claim for v in vmi.status.migrated_volumes if v.destination_claim}
    copied = decentral_volumes(vmi)
    moved |= {
        v.claim.claim_name
        for v in vmi.spec.volumes
        if v.claim is not None and v.claim.claim_name and v.name in copied
    }
    return frozenset(moved)
