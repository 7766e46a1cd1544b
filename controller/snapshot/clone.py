"""The VirtualMachineClone controller: KubeVirt's clone as a snapshot and a restore.

    sync(key): clone from the cache → SnapshotInProgress: a temporary snapshot of the source
               VM (`tmp-snapshot-<uid>`, owned by the clone) until readyToUse →
               RestoreInProgress: a temporary restore into the target with the clone's
               patches (new MACs, no firmware UUID, SMBIOS serial, label filters) until
               complete → both deleted → Succeeded

A source VirtualMachineSnapshot is restored from directly (and never deleted). The target
VM carries the restore's marker, so a restart after the restore finished (its objects
already gone) goes straight to Succeeded instead of restoring again.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

import structlog

from controller.reconcile import refresher
from controller.snapshot.base import PolledReconciler
from controller.snapshot.clone_logic import (
    clone_patches,
    restore_name,
    snapshot_name,
    target_name,
    volume_policy,
)
from controller.snapshot.logic import conditions_for, owner_ref
from controller.snapshot.restore import FAILED_REASON
from controller.snapshot.restore_logic import RESTORE_ANNOTATION
from shared.kube import (
    VMCLONES,
    VMRESTORES,
    VMSNAPSHOTS,
    EventType,
    NotFound,
)
from shared.model import format_time
from shared.model.clone import SNAPSHOT_KIND, ClonePhase, VirtualMachineClone
from shared.model.snapshot import (
    SNAPSHOT_API_VERSION,
    SnapshotPhase,
    VirtualMachineRestore,
    VirtualMachineSnapshot,
)

log = structlog.get_logger("controller.snapshot")


class CloneFailed(Exception):
    """The clone cannot be done (its snapshot or restore failed, its source is gone)."""


class CloneController(PolledReconciler[VirtualMachineClone]):
    """Reconciles VirtualMachineClones."""

    kind = "vmclone"
    synchronized_on = "clones"

    async def sync(self, key: str) -> None:
        clone = self._informers.clones.store.get(key)
        if clone is None or clone.metadata.is_deleting or clone.phase.is_final():
            return
        now = self._clock()
        try:
            phase = await self._step(clone)
        except CloneFailed as e:
            log.warning("vmclone_failed", error=str(e))
            await self._write(clone, ClonePhase.FAILED, str(e), now)
            return
        await self._write(clone, phase, "", now)
        if not phase.is_final():
            self.queue.add_after(key, self._poll)

    async def _step(self, clone: VirtualMachineClone) -> ClonePhase:
        ns, target = clone.namespace, target_name(clone)
        vm = self._informers.vms.store.get(f"{ns}/{target}")
        marker = vm.metadata.annotations.get(RESTORE_ANNOTATION, "") if vm is not None else ""
        if marker.startswith(f"{restore_name(clone)}-"):
            await self._clean_up(clone)
            return ClonePhase.SUCCEEDED
        snap = await self._snapshot(clone)
        if snap is None:
            return ClonePhase.SNAPSHOT_IN_PROGRESS
        restore = self._informers.restores.store.get(f"{ns}/{restore_name(clone)}")
        if restore is None:
            await self._create_restore(clone, snap)
            return ClonePhase.RESTORE_IN_PROGRESS
        if any(c.reason == FAILED_REASON for c in restore.status.conditions):
            raise CloneFailed(f"restore {restore.name} failed: {_message(restore)}")
        return ClonePhase.RESTORE_IN_PROGRESS  # the VM's marker says when it is done

    async def _snapshot(self, clone: VirtualMachineClone) -> VirtualMachineSnapshot | None:
        """The ready snapshot to restore from; None while it is being made."""
        source = clone.spec.source
        if source is None or not source.name:
            raise CloneFailed("spec.source: required")
        ns = clone.namespace
        if source.kind == SNAPSHOT_KIND:
            snap = self._informers.snapshots.store.get(f"{ns}/{source.name}")
            if snap is None or snap.phase is SnapshotPhase.FAILED:
                raise CloneFailed(
                    f"spec.source: VirtualMachineSnapshot {source.name} is not usable"
                )
            return snap if snap.status.ready_to_use else None
        snap = self._informers.snapshots.store.get(f"{ns}/{snapshot_name(clone)}")
        if snap is None:
            if self._informers.vms.store.get(f"{ns}/{source.name}") is None:
                raise CloneFailed(f"spec.source: VirtualMachine {source.name} does not exist")
            await self._kube.create(VMSNAPSHOTS, self._snapshot_body(clone, source.name))
            return None
        if snap.phase is SnapshotPhase.FAILED:
            error = snap.status.error.message if snap.status.error else "failed"
            raise CloneFailed(f"snapshot {snap.name}: {error}")
        return snap if snap.status.ready_to_use else None

    def _snapshot_body(self, clone: VirtualMachineClone, vm: str) -> dict[str, object]:
        return {
            "apiVersion": SNAPSHOT_API_VERSION,
            "kind": VirtualMachineSnapshot.KIND,
            "metadata": {
                "name": snapshot_name(clone),
                "namespace": clone.namespace,
                "ownerReferences": [owner_ref(clone)],
            },
            "spec": {"source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": vm}},
        }

    async def _create_restore(
        self, clone: VirtualMachineClone, snap: VirtualMachineSnapshot
    ) -> None:
        content = await self._kube.content(snap)
        source = content.spec.source.virtual_machine if content is not None else None
        if source is None:
            raise CloneFailed(f"snapshot {snap.name} holds no VirtualMachine")
        patches = clone_patches(clone, source.metadata.to_dict(), source.spec.to_dict())
        body = {
            "apiVersion": SNAPSHOT_API_VERSION,
            "kind": VirtualMachineRestore.KIND,
            "metadata": {
                "name": restore_name(clone),
                "namespace": clone.namespace,
                "ownerReferences": [owner_ref(clone)],
            },
            "spec": {
                "target": {
                    "apiGroup": "kubevirt.io",
                    "kind": "VirtualMachine",
                    "name": target_name(clone),
                },
                "virtualMachineSnapshotName": snap.name,
                "volumeRestorePolicy": str(volume_policy(clone)),
                "patches": patches,
            },
        }
        await self._kube.create(VMRESTORES, body)

    async def _clean_up(self, clone: VirtualMachineClone) -> None:
        """The temporary restore and snapshot (the snapshot's content and VolumeSnapshots go
        with it by their ownerReferences)."""
        await self._kube.delete(VMRESTORES, restore_name(clone), clone.namespace)
        source = clone.spec.source
        if source is not None and source.kind != SNAPSHOT_KIND:
            await self._kube.delete(VMSNAPSHOTS, snapshot_name(clone), clone.namespace)

    async def _write(
        self, clone: VirtualMachineClone, phase: ClonePhase, message: str, now: datetime
    ) -> None:
        stamp = format_time(now)
        snap_phase = {
            ClonePhase.SUCCEEDED: SnapshotPhase.SUCCEEDED,
            ClonePhase.FAILED: SnapshotPhase.FAILED,
        }.get(phase, SnapshotPhase.IN_PROGRESS)
        conds = conditions_for(
            clone.status.conditions, phase=snap_phase, message=message or str(phase), now=stamp
        )
        status = dataclasses.replace(
            clone.status,
            phase=phase,
            conditions=conds,
            creation_time=clone.status.creation_time
            or (stamp if phase is ClonePhase.SUCCEEDED else None),
            snapshot_name=_snapshot_of(clone),
            restore_name=restore_name(clone),
            target_name=target_name(clone),
        )
        new = dataclasses.replace(clone, status=status)
        if new.status == clone.status:
            return
        try:
            refresh = refresher(self._client, VMCLONES, VirtualMachineClone, clone.key)
            await self._writer.write_status(clone, new, refresh=refresh)
        except NotFound:
            return
        if phase != clone.phase:
            log.info("vmclone_phase", phase=str(phase))
            kind = EventType.WARNING if phase is ClonePhase.FAILED else EventType.NORMAL
            self._recorder.event(
                clone, kind, f"VirtualMachineClone{phase}", message or f"phase {phase}"
            )


def _snapshot_of(clone: VirtualMachineClone) -> str | None:
    source = clone.spec.source
    if source is not None and source.kind == SNAPSHOT_KIND:
        return source.name
    return snapshot_name(clone)


def _message(restore: VirtualMachineRestore) -> str:
    ready = next((c for c in restore.status.conditions if c.type == "Ready"), None)
    return (ready.message if ready is not None else None) or "failed"
