"""An export of a VirtualMachineSnapshot (KubeVirt's design): every volume backup of the
snapshot's content becomes a claim restored from its CSI VolumeSnapshot, named
`<export>-<backed-up claim>` and owned by the export (the garbage collector removes it with
the export); the exporter pod serves those claims.

    snapshot missing                    → Pending VMSnapshotNotFound
    snapshot not readyToUse             → Pending VMSnapshotNotReady
    a claim of the name not the export's → Pending InUse
    otherwise                           → the restored claims (made when missing; they bind
                                          when the exporter pod, their first consumer, runs)

The snapshot comes from the informer cache, its content and the claims with a GET.
"""

from __future__ import annotations

from typing import Any

from controller.export.bodies import BLOCK, Claim, is_owned, owner_ref
from controller.export.logic import IN_USE, Blocked
from controller.informers import Informers
from controller.objectio import ObjectIO
from controller.snapshot.restore_logic import spec_from_snapshot
from shared.kube import PVCS, VMSNAPSHOTCONTENTS
from shared.model.export import VirtualMachineExport
from shared.model.snapshot import VirtualMachineSnapshotContent, VolumeBackup
from shared.naming import fit

SNAPSHOT_NOT_FOUND = "VMSnapshotNotFound"
SNAPSHOT_NOT_READY = "VMSnapshotNotReady"


def restored_claim_name(vme: VirtualMachineExport, backup: VolumeBackup) -> str:
    """The claim restored for one volume backup: `<export>-<backed-up claim>`."""
    original = backup.persistent_volume_claim.metadata.name or backup.volume_name or "volume"
    return fit(f"{vme.name}-{original}")


def restored_claim(vme: VirtualMachineExport, backup: VolumeBackup) -> dict[str, Any]:
    """The claim made from the backup's VolumeSnapshot, controlled by the export."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": restored_claim_name(vme, backup),
            "namespace": vme.namespace,
            "ownerReferences": [owner_ref(vme)],
        },
        "spec": spec_from_snapshot(backup),
    }


async def snapshot_claims(
    io: ObjectIO, informers: Informers, vme: VirtualMachineExport, name: str
) -> tuple[tuple[Claim, ...], Blocked | None]:
    """The snapshot's restored claims (made when missing), or why not now."""
    snap = informers.snapshots.store.get(f"{vme.namespace}/{name}")
    if snap is None:
        return (), Blocked(
            reason=SNAPSHOT_NOT_FOUND, message=f"VirtualMachineSnapshot {name} does not exist"
        )
    content_name = snap.status.virtual_machine_snapshot_content_name
    raw = await io.get(VMSNAPSHOTCONTENTS, content_name, vme.namespace) if content_name else None
    if snap.status.ready_to_use is not True or raw is None:
        message = f"VirtualMachineSnapshot {name} is not readyToUse"
        return (), Blocked(reason=SNAPSHOT_NOT_READY, message=message)
    content = VirtualMachineSnapshotContent.from_dict(raw)
    claims = []
    for backup in content.spec.volume_backups:
        body = restored_claim(vme, backup)
        claim_name = body["metadata"]["name"]
        found = await io.get(PVCS, claim_name, vme.namespace)
        if found is None:
            await io.create(PVCS, body, owner=vme, what="claim restored from the snapshot")
        elif not is_owned(found, vme):
            message = f"PersistentVolumeClaim {claim_name} exists and is not this export's"
            return (), Blocked(reason=IN_USE, message=message)
        claims.append(Claim(name=claim_name, block=body["spec"].get("volumeMode") == BLOCK))
    return tuple(claims), None
