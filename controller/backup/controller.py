"""The VirtualMachineBackup controller (KubeVirt 1.8's backup controller, push mode).

    sync(key): backup from the cache → its tracker (GET) and VM/VMI (caches) → refused?
               (no VM, no CBT, not running, migrating, no target claim) → Done with why
             → not started: the target pod on the VMI's node (made when missing); once it
               runs, Start through the aggregated API (the handler mounts the claim into the
               launcher, the launcher freezes, begins the libvirt backup, thaws) → Progressing
             → started: Status; Completed → the tracker records the new checkpoint → Done;
               Failed → Done with libvirt's message; the target pod is deleted either way

Typed errors end as conditions (Done=True with a reason), never as a crash loop. An
unfinished backup comes back every `poll` seconds (the launcher's job is asked, not
watched). A restart mid-way finds the conditions written and goes on from there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime

import structlog

from controller.backup.kube import BackupKube
from controller.backup.logic import (
    Reason,
    Refusal,
    base_checkpoint,
    checkpoint_name,
    done,
    finished,
    is_started,
    running_refusal,
    started,
    target_pod,
    target_pod_name,
    vm_name,
    with_condition,
)
from controller.deps import Deps
from controller.reconcile import Reconciler, refresher
from shared.backupcbt import cbt_refusal, needs_namespace_labels
from shared.clusterconfig import ClusterConfig, effective
from shared.kube import ApiError, EventType, Handlers, NotFound, StatusWriter, WorkQueue
from shared.kube.resources import VMBACKUPS
from shared.model import VirtualMachine, VirtualMachineInstance
from shared.model.backup import (
    BackupCheckpoint,
    BackupConditionType,
    BackupStatus,
    VirtualMachineBackup,
    VirtualMachineBackupTracker,
    is_tracker_ref,
)
from shared.wire.backup import BackupCmd, BackupRequest

log = structlog.get_logger("controller.backup")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TargetImage:
    """The image target pods run (the launcher's: busybox sleeps with the claim mounted)."""

    image: str
    pull_policy: str = "IfNotPresent"


class BackupController(Reconciler):
    """Reconciles VirtualMachineBackups: target pod, the launcher's job, tracker, conditions."""

    kind = "vmbackup"
    synchronized_on = "backups"

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        writer: StatusWriter[VirtualMachineBackup],
        target: TargetImage,
        cluster: Callable[[], ClusterConfig],
        poll: float = 1.0,
    ) -> None:
        super().__init__(deps, queue)
        self._writer = writer
        self._target = target
        self._cluster = cluster
        self._poll = poll
        self._kube = BackupKube(deps.client)

    def handlers(self) -> Handlers[VirtualMachineBackup]:
        """Callbacks for the backup informer."""
        return Handlers(
            on_add=lambda b: self.enqueue(b.key),
            on_update=lambda old, new: self.enqueue(new.key),
        )

    async def sync(self, key: str) -> None:
        backup = self._informers.backups.store.get(key)
        if backup is None or backup.metadata.is_deleting:
            return
        pod = target_pod_name(backup)
        if backup.status.done:
            await self._kube.delete_pod(backup.namespace, pod)
            return
        now = self._clock()
        tracker = await self._tracker(backup)
        name = vm_name(backup, tracker)
        vm = self._informers.vms.store.get(f"{backup.namespace}/{name}")
        vmi = self._informers.vmis.store.get(f"{backup.namespace}/{name}")
        refusal = await self._refusal(backup, tracker, vm, vmi)
        if refusal is not None:
            await self._kube.delete_pod(backup.namespace, pod)
            status = done(backup.status, reason=refusal.reason, message=refusal.message, now=now)
            await self._write(backup, status)
            return
        assert vmi is not None  # refused otherwise
        status = await self._advance(backup, tracker, vmi, now)
        await self._write(backup, status)
        if status.done:
            await self._kube.delete_pod(backup.namespace, pod)
        else:
            self.queue.add_after(key, self._poll)

    async def _tracker(self, backup: VirtualMachineBackup) -> VirtualMachineBackupTracker | None:
        if not is_tracker_ref(backup.spec.source):
            return None
        return await self._kube.tracker(backup.namespace, backup.spec.source.name or "")

    async def _refusal(
        self,
        backup: VirtualMachineBackup,
        tracker: VirtualMachineBackupTracker | None,
        vm: VirtualMachine | None,
        vmi: VirtualMachineInstance | None,
    ) -> Refusal | None:
        """Why the backup cannot be made (None: it can, or it already runs)."""
        source = backup.spec.source.name
        if is_tracker_ref(backup.spec.source) and tracker is None:
            message = f"VirtualMachineBackupTracker {source} does not exist"
            return Refusal(reason=Reason.SOURCE_NOT_FOUND, message=message)
        name = vm_name(backup, tracker)
        if vm is None:
            message = f"VirtualMachine {name} does not exist"
            return Refusal(reason=Reason.SOURCE_NOT_FOUND, message=message)
        if is_started(backup.status):
            return running_refusal(vmi, name) if vmi is None else None
        why = await self._cbt_refusal(vm)
        if why:
            return Refusal(reason=Reason.CBT_NOT_ENABLED, message=why)
        return running_refusal(vmi, name) or await self._claim_refusal(backup)

    async def _claim_refusal(self, backup: VirtualMachineBackup) -> Refusal | None:
        claim = backup.spec.pvc_name or ""
        if await self._kube.claim_exists(backup.namespace, claim):
            return None
        message = f"the target claim {claim} does not exist"
        return Refusal(reason=Reason.TARGET_NOT_FOUND, message=message)

    async def _cbt_refusal(self, vm: VirtualMachine) -> str:
        kv = effective(self._informers.kubevirts.store.list())
        config = kv.spec.configuration if kv is not None else None
        ns_labels = None
        if needs_namespace_labels(config):
            ns_labels = await self._kube.namespace_labels(vm.namespace)
        return cbt_refusal(
            config,
            gates=self._cluster().feature_gates,
            vm_labels=vm.metadata.labels,
            namespace_labels=ns_labels,
        )

    async def _advance(
        self,
        backup: VirtualMachineBackup,
        tracker: VirtualMachineBackupTracker | None,
        vmi: VirtualMachineInstance,
        now: datetime,
    ) -> BackupStatus:
        """This sync's status: waiting for the target, started, or finished."""
        status = backup.status
        if is_started(status):
            return await self._follow(backup, tracker, vmi, now)
        node = vmi.status.node_name or ""
        pod = await self._kube.pod(backup.namespace, target_pod_name(backup))
        if pod is None:
            body = target_pod(
                backup, node=node, image=self._target.image, pull_policy=self._target.pull_policy
            )
            await self._kube.create_pod(body)
        if pod is None or (pod.get("status") or {}).get("phase") != "Running":
            message = f"waiting for the target claim {backup.spec.pvc_name} on node {node}"
            return with_condition(
                status,
                BackupConditionType.INITIALIZING,
                true=True,
                reason=str(Reason.WAITING_FOR_TARGET),
                message=message,
                now=now,
            )
        return await self._start(backup, tracker, vmi, now)

    async def _start(
        self,
        backup: VirtualMachineBackup,
        tracker: VirtualMachineBackupTracker | None,
        vmi: VirtualMachineInstance,
        now: datetime,
    ) -> BackupStatus:
        base = base_checkpoint(backup, tracker)
        request = BackupRequest(
            backup_name=backup.name,
            checkpoint=checkpoint_name(backup, tracker, now),
            incremental=base,
            skip_quiesce=bool(backup.spec.skip_quiesce),
            target_pod=target_pod_name(backup),
        )
        try:
            reply = await self._kube.backup_action(backup.namespace, vmi.name, request)
        except ApiError as e:
            message = f"the backup could not start: {e}"
            return done(backup.status, reason=Reason.FAILED, message=message, now=now)
        log.info("backup_started", checkpoint=reply.checkpoint, base=base)
        self._recorder.event(backup, EventType.NORMAL, "BackupStarted", f"base {base or 'none'}")
        return started(backup.status, reply, incremental_asked=base is not None, now=now)

    async def _follow(
        self,
        backup: VirtualMachineBackup,
        tracker: VirtualMachineBackupTracker | None,
        vmi: VirtualMachineInstance,
        now: datetime,
    ) -> BackupStatus:
        request = BackupRequest(cmd=BackupCmd.STATUS, backup_name=backup.name)
        try:
            reply = await self._kube.backup_action(backup.namespace, vmi.name, request)
        except ApiError as e:
            message = f"the backup job was lost: {e}"
            return done(backup.status, reason=Reason.FAILED, message=message, now=now)
        status = finished(backup.status, reply, now=now)
        if status is None:
            return backup.status
        cond = status.condition(BackupConditionType.DONE)
        completed = cond is not None and cond.reason == Reason.COMPLETED
        if completed and tracker is not None and status.checkpoint_name:
            checkpoint = BackupCheckpoint(
                name=status.checkpoint_name,
                creation_time=cond.last_transition_time if cond else None,
                volumes=status.included_volumes,
            )
            await self._kube.record_checkpoint(tracker, checkpoint)
        return status

    async def _write(self, backup: VirtualMachineBackup, status: BackupStatus) -> None:
        new = dataclasses.replace(backup, status=status)
        if new.status == backup.status:
            return
        try:
            refresh = refresher(self._client, VMBACKUPS, VirtualMachineBackup, backup.key)
            await self._writer.write_status(backup, new, refresh=refresh)
        except NotFound:
            return
        cond = status.condition(BackupConditionType.DONE)
        if status.done and not backup.status.done and cond is not None:
            kind = EventType.NORMAL if cond.reason == Reason.COMPLETED else EventType.WARNING
            self._recorder.event(backup, kind, f"Backup{cond.reason}", cond.message or "")
            log.info("backup_done", reason=cond.reason, message=cond.message)
