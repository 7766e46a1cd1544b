"""The VirtualMachineRestore controller.

    sync(key): restore from the cache → its snapshot (cache) and content (GET) → the target
               VM and VMI (caches) → a running target stopped (StopTarget) or waited for →
               the claims made from the VolumeSnapshots → the VM made or its spec replaced
               → the claims handed to the VM → status complete

targetReadinessPolicy (KubeVirt's names): StopTarget stops a running target (runStrategy
Halted) and goes on once its VMI is gone; WaitGracePeriod (the default) waits up to 5
minutes for the user to stop it, then fails; WaitEventually waits for ever; FailImmediate
fails at once. Each step is idempotent: the restored VM carries the restore's marker, the
claims the restore's name, so a restart finds what is done.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

import structlog

from controller.reconcile import refresher
from controller.snapshot.base import PolledReconciler
from controller.snapshot.logic import conditions_for
from controller.snapshot.restore_logic import (
    CLAIM_RESTORE_ANNOTATION,
    RESTORE_ANNOTATION,
    PatchError,
    claim_body,
    claim_name,
    new_vm_body,
    restore_marker,
    restored_spec,
    restores_of,
)
from shared.kube import (
    PVCS,
    VMRESTORES,
    VMS,
    EventType,
    NotFound,
)
from shared.model import VirtualMachine, format_time, parse_time
from shared.model.snapshot import (
    RestoreStatus,
    SnapshotPhase,
    TargetReadinessPolicy,
    VirtualMachineRestore,
    VirtualMachineSnapshotContent,
)

log = structlog.get_logger("controller.snapshot")

GRACE_PERIOD = timedelta(minutes=5)  # KubeVirt's DefaultGracePeriod
FAILED_REASON = "Operation failed"  # conditions_for's reason of the Failed phase


class Wait(Exception):
    """Not yet: the message goes into the Progressing condition and the key comes back."""


class RestoreFailed(Exception):
    """The restore cannot be done: Ready False with the reason, not retried."""


class RestoreController(PolledReconciler[VirtualMachineRestore]):
    """Reconciles VirtualMachineRestores."""

    kind = "vmrestore"
    synchronized_on = "restores"

    async def sync(self, key: str) -> None:
        restore = self._informers.restores.store.get(key)
        if restore is None or restore.metadata.is_deleting or _finished(restore):
            return
        now = self._clock()
        try:
            status = await self._restore(restore, now)
        except Wait as w:
            await self._write(restore, _progress(restore, str(w), now))
            self.queue.add_after(key, self._poll)
            return
        except (RestoreFailed, PatchError) as e:
            await self._write(restore, _failed(restore, str(e), now))
            return
        await self._write(restore, status)

    async def _restore(self, restore: VirtualMachineRestore, now: datetime) -> RestoreStatus:
        content = await self._content(restore)
        target = restore.spec.target
        if not target.is_vm() or not target.name:
            raise RestoreFailed("spec.target: only a kubevirt.io VirtualMachine can be restored")
        vm_key = f"{restore.namespace}/{target.name}"
        vm = self._informers.vms.store.get(vm_key)
        if vm is not None and vm.metadata.annotations.get(RESTORE_ANNOTATION) != restore_marker(
            restore
        ):
            await self._stopped(restore, vm, now)
        for backup in content.spec.volume_backups:
            await self._claim(restore, backup)
        written = await self._write_vm(restore, content, vm)
        for backup in content.spec.volume_backups:
            await self._hand_over(restore, claim_name(restore, backup), written)
        stamp = format_time(now)
        log.info("vmrestore_complete", target=target.name)
        self._recorder.event(
            restore, EventType.NORMAL, "VirtualMachineRestoreComplete", f"restored {target.name}"
        )
        return dataclasses.replace(
            restore.status,
            restores=restores_of(restore, content),
            restore_time=stamp,
            complete=True,
            conditions=conditions_for(
                restore.status.conditions, phase=SnapshotPhase.SUCCEEDED, message="", now=stamp
            ),
        )

    async def _content(self, restore: VirtualMachineRestore) -> VirtualMachineSnapshotContent:
        name = restore.spec.virtual_machine_snapshot_name or ""
        snap = self._informers.snapshots.store.get(f"{restore.namespace}/{name}")
        if snap is None:
            raise Wait(f"VirtualMachineSnapshot {name} does not exist")
        if snap.phase is SnapshotPhase.FAILED:
            raise RestoreFailed(f"VirtualMachineSnapshot {name} failed")
        if not snap.status.ready_to_use or not snap.status.virtual_machine_snapshot_content_name:
            raise Wait(f"VirtualMachineSnapshot {name} is not ready to use")
        content = await self._kube.content(snap)
        if content is None:
            raise RestoreFailed(f"the content of VirtualMachineSnapshot {name} is gone")
        return content

    async def _stopped(
        self, restore: VirtualMachineRestore, vm: VirtualMachine, now: datetime
    ) -> None:
        """Return once the target has no VMI; stop it or wait, by targetReadinessPolicy."""
        if self._informers.vmis.store.get(vm.key) is None:
            return
        policy = restore.spec.target_readiness_policy or TargetReadinessPolicy.WAIT_GRACE_PERIOD
        if policy is TargetReadinessPolicy.FAIL_IMMEDIATE:
            raise RestoreFailed(
                f"VirtualMachine {vm.name} is running (targetReadinessPolicy FailImmediate)"
            )
        if policy is TargetReadinessPolicy.STOP_TARGET:
            if vm.spec.run_strategy != "Halted" or vm.spec.running:
                patch = {"spec": {"runStrategy": "Halted", "running": None}}
                await self._client.patch(VMS, vm.name, patch, namespace=vm.namespace)
                log.info("vmrestore_stopping_target", target=vm.name)
            raise Wait(f"stopping VirtualMachine {vm.name}")
        created = restore.metadata.creation_timestamp
        late = created is not None and now > parse_time(created) + GRACE_PERIOD
        if policy is TargetReadinessPolicy.WAIT_GRACE_PERIOD and late:
            raise RestoreFailed(f"VirtualMachine {vm.name} was not stopped within the grace period")
        raise Wait(f"waiting for VirtualMachine {vm.name} to stop")

    async def _claim(self, restore: VirtualMachineRestore, backup: Any) -> None:
        name = claim_name(restore, backup)
        raw = await self._kube.claim(restore.namespace, name)
        if raw is not None:
            meta = raw.get("metadata") or {}
            if (meta.get("annotations") or {}).get(CLAIM_RESTORE_ANNOTATION) == restore.name:
                return
            if meta.get("deletionTimestamp") is None:  # InPlace: the old claim goes first
                await self._kube.delete(PVCS, name, restore.namespace)
                log.info("vmrestore_claim_replaced", claim=name)
            raise Wait(f"waiting for the old claim {name} to be deleted")
        await self._kube.create(PVCS, claim_body(restore, backup))

    async def _write_vm(
        self,
        restore: VirtualMachineRestore,
        content: VirtualMachineSnapshotContent,
        vm: VirtualMachine | None,
    ) -> dict[str, Any]:
        marker = restore_marker(restore)
        if vm is None:
            body = new_vm_body(content, restore, restored_spec(content, restore, current=None))
            return await self._kube.create(VMS, body)
        raw = await self._kube.get(VMS, vm.name, vm.namespace)
        if raw is None:
            raise Wait(f"VirtualMachine {vm.name} vanished")
        annotations = (raw.get("metadata") or {}).setdefault("annotations", {})
        if annotations.get(RESTORE_ANNOTATION) == marker:
            return raw
        annotations[RESTORE_ANNOTATION] = marker
        raw["spec"] = restored_spec(content, restore, current=vm)
        raw.pop("status", None)
        return await self._client.update(VMS, raw)

    async def _hand_over(
        self, restore: VirtualMachineRestore, name: str, vm: dict[str, Any]
    ) -> None:
        """The claim's owner becomes the VM (volumeOwnershipPolicy Vm) or nobody (None)."""
        meta = vm.get("metadata") or {}
        refs = []
        if restore.spec.volume_ownership_policy != "None":
            refs = [
                {
                    "apiVersion": "kubevirt.io/v1",
                    "kind": "VirtualMachine",
                    "name": meta.get("name"),
                    "uid": meta.get("uid"),
                    "blockOwnerDeletion": False,
                }
            ]
        raw = await self._kube.claim(restore.namespace, name)
        if raw is None or (raw.get("metadata") or {}).get("ownerReferences") == refs:
            return
        await self._client.patch(
            PVCS, name, {"metadata": {"ownerReferences": refs}}, namespace=restore.namespace
        )

    async def _write(self, restore: VirtualMachineRestore, status: RestoreStatus) -> None:
        new = dataclasses.replace(restore, status=status)
        if new.status == restore.status:
            return
        try:
            refresh = refresher(self._client, VMRESTORES, VirtualMachineRestore, restore.key)
            await self._writer.write_status(restore, new, refresh=refresh)
        except NotFound:
            return


def _finished(restore: VirtualMachineRestore) -> bool:
    """Complete, or failed for good."""
    failed = any(c.type == "Ready" and c.reason == FAILED_REASON for c in restore.status.conditions)
    return bool(restore.status.complete) or failed


def _progress(restore: VirtualMachineRestore, message: str, now: datetime) -> RestoreStatus:
    conds = conditions_for(
        restore.status.conditions,
        phase=SnapshotPhase.IN_PROGRESS,
        message=message,
        now=format_time(now),
    )
    # The transition times stay while only the message changes: no write per poll.
    if [(c.type, c.status, c.message) for c in conds] == [
        (c.type, c.status, c.message) for c in restore.status.conditions
    ]:
        return restore.status
    return dataclasses.replace(restore.status, complete=False, conditions=conds)


def _failed(restore: VirtualMachineRestore, message: str, now: datetime) -> RestoreStatus:
    log.warning("vmrestore_failed", error=message)
    conds = conditions_for(
        restore.status.conditions, phase=SnapshotPhase.FAILED, message=message, now=format_time(now)
    )
    return dataclasses.replace(restore.status, complete=False, conditions=conds)
