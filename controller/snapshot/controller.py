"""The VirtualMachineSnapshot controller (KubeVirt's snapshot controller, its content side
folded in).

    sync(key): snapshot from the cache → its VM and VMI (caches) → the content (GET; made
               with the VM copy when missing) → its VolumeSnapshots (GET) → the missing
               ones created, the guest frozen around that when it runs with an agent
               (thawed on every path) → content status → snapshot status

Everything made hangs from the snapshot by ownerReferences (content ← snapshot unless
deletionPolicy Retain, VolumeSnapshots ← content): deleting the snapshot leaves nothing.
A sync is idempotent: a restart mid-way finds what exists and makes only what is missing.
VolumeSnapshots are read with a GET; until the snapshot is final its key comes back every
`poll` seconds (`fast_poll` in its first `fast_for` seconds, when a CSI snapshot usually
turns readyToUse: a VolumeSnapshot watch would need its CRD wherever the controller runs).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Mapping
from datetime import datetime, timedelta
from typing import Any

import structlog

from controller.deps import Deps
from controller.reconcile import Reconciler, refresher
from controller.snapshot.base import at_once
from controller.snapshot.kube import SnapshotKube
from controller.snapshot.logic import (
    Backup,
    ClaimInfo,
    Online,
    VolumePlan,
    VSState,
    claim_names,
    content_body,
    deadline_passed,
    failed_status,
    failure_deadline,
    freeze_budget,
    pick_snapshot_class,
    snapshot_status,
    volume_snapshot_body,
    volume_snapshot_name,
    volumes_of,
)
from shared.kube import (
    VMSNAPSHOTS,
    ApiError,
    EventType,
    Handlers,
    NotFound,
    StatusWriter,
    TransportError,
    WorkQueue,
)
from shared.model import VirtualMachine, VirtualMachineInstance, VMIPhase, parse_time
from shared.model.enums import VMIConditionType
from shared.model.snapshot import (
    SnapshotStatus,
    VirtualMachineSnapshot,
    VirtualMachineSnapshotContent,
)

log = structlog.get_logger("controller.snapshot")

POLL_SECONDS = 1.0
FREEZE_TIMEOUT = 60.0  # a freeze the agent has not answered by then has failed
MIN_UNFREEZE = 30.0  # the launcher thaws by itself after this if we never come back


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotTiming:
    """How often an unfinished snapshot is looked at and how long a freeze may take."""

    poll: float = POLL_SECONDS
    fast_poll: float = 0.1
    fast_for: float = 10.0
    freeze_timeout: float = FREEZE_TIMEOUT


class SnapshotController(Reconciler):
    """Reconciles VirtualMachineSnapshots: content, VolumeSnapshots, freeze, phase."""

    kind = "vmsnapshot"
    synchronized_on = "snapshots"

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        writer: StatusWriter[VirtualMachineSnapshot],
        timing: SnapshotTiming = SnapshotTiming(),
    ) -> None:
        super().__init__(deps, queue)
        self._writer = writer
        self._timing = timing
        self._kube = SnapshotKube(deps.client)

    def handlers(self) -> Handlers[VirtualMachineSnapshot]:
        """Callbacks for the snapshot informer."""
        return Handlers(
            on_add=lambda s: self.enqueue(s.key),
            on_update=lambda old, new: self.enqueue(new.key),
        )

    async def sync(self, key: str) -> None:
        snap = self._informers.snapshots.store.get(key)
        if snap is None or snap.metadata.is_deleting:
            return
        vm, vmi = self._source(snap)
        online = _online(vmi)
        if snap.phase.is_final():
            if online.frozen:  # frozen for us, then a restart before the thaw
                await self._thaw(snap, vmi)
            return
        now = self._clock()
        why = _refusal(snap, vm)
        if not why and deadline_passed(snap, now):
            limit = snap.spec.failure_deadline or "5m0s"
            why = f"snapshot did not finish within its failureDeadline ({limit})"
        if why:
            if online.frozen:
                await self._thaw(snap, vmi)
            await self._write(snap, failed_status(snap, why, now))
            return
        status, content, states = await self._advance(snap, vm, vmi, online)
        writes = [self._write(snap, status)]
        if content is not None:
            ready = status.ready_to_use is True
            writes.append(self._kube.write_content_status(content, states, ready, self._clock()))
        await at_once(*writes)  # one round trip, not two
        if not status.phase or not status.phase.is_final():
            self.queue.add_after(key, self._next_look(snap, now))

    def _next_look(self, snap: VirtualMachineSnapshot, now: datetime) -> float:
        created = snap.metadata.creation_timestamp
        young = created is not None and now - parse_time(created) < timedelta(
            seconds=self._timing.fast_for
        )
        return self._timing.fast_poll if young else self._timing.poll

    def _source(
        self, snap: VirtualMachineSnapshot
    ) -> tuple[VirtualMachine | None, VirtualMachineInstance | None]:
        key = f"{snap.namespace}/{snap.spec.source.name}"
        return self._informers.vms.store.get(key), self._informers.vmis.store.get(key)

    async def _advance(
        self,
        snap: VirtualMachineSnapshot,
        vm: VirtualMachine | None,
        vmi: VirtualMachineInstance | None,
        online: Online,
    ) -> tuple[SnapshotStatus, VirtualMachineSnapshotContent | None, dict[str, VSState]]:
        """This sync's snapshot status, the content and its VolumeSnapshots' states."""
        content, plan = await self._content(snap, vm)
        states = await self._kube.volume_snapshots(
            snap.namespace, [volume_snapshot_name(snap.uid, b.volume) for b in plan.backups]
        )
        missing = [
            b for b in plan.backups if volume_snapshot_name(snap.uid, b.volume) not in states
        ]
        error = ""
        if missing and content is not None and not plan.error:
            missing, error = await self._with_classes(vm, missing)
        if missing and content is not None and not error:
            error = await self._snapshot_volumes(snap, vmi, online, content, missing)
            states = {
                **states,
                **{
                    volume_snapshot_name(snap.uid, b.volume): VSState(name=b.volume)
                    for b in missing
                },
            }
        elif online.frozen:
            await self._thaw(snap, vmi)  # a restart while frozen: the VolumeSnapshots exist
        status = snapshot_status(
            snap, vm=vm, online=online, plan=plan, states=states, error=error, now=self._clock()
        )
        return status, content, states

    async def _content(
        self, snap: VirtualMachineSnapshot, vm: VirtualMachine | None
    ) -> tuple[VirtualMachineSnapshotContent | None, VolumePlan]:
        """The content (made from the VM when missing) and the volumes it lists; once made,
        the content, not the VM as it is now, says what the snapshot holds."""
        content = await self._kube.content(snap)
        if content is not None:
            return content, _plan_from_content(content, snap)
        if vm is None:
            return None, VolumePlan(error=f"VirtualMachine {snap.spec.source.name} is gone")
        plan = await self._plan(vm)
        if plan.error:
            return None, plan
        return await self._kube.create_content(content_body(snap, vm, plan)), plan

    async def _with_classes(
        self, vm: VirtualMachine | None, missing: list[Backup]
    ) -> tuple[list[Backup], str]:
        """The backups still to snapshot with their VolumeSnapshotClasses, read now."""
        if all(b.claim.snapshot_class for b in missing):
            return missing, ""
        if vm is None:
            return [], "the VirtualMachine went before its volumes were snapshotted"
        plan = await self._plan(vm)
        by_volume = {b.volume: b for b in plan.backups}
        if plan.error or any(b.volume not in by_volume for b in missing):
            return [], plan.error or "the VirtualMachine's volumes changed during the snapshot"
        return [by_volume[b.volume] for b in missing], ""

    async def _plan(self, vm: VirtualMachine) -> VolumePlan:
        """The VM's volumes with their claims and VolumeSnapshotClasses, read now."""
        names = set(claim_names(vm).values())
        if not names:
            return volumes_of(vm, {})
        ordered = sorted(names)
        reads: list[Awaitable[Any]] = [
            self._kube.storage_classes(),
            self._kube.snapshot_classes(),
            *(self._kube.claim(vm.namespace, name) for name in ordered),
        ]
        storage, snap_classes, *raws = await at_once(*reads)  # one round trip, not 2 + claims
        claims = {
            name: _claim_info(name, raw, storage, snap_classes)
            for name, raw in zip(ordered, raws, strict=True)
        }
        return volumes_of(vm, claims)

    async def _snapshot_volumes(
        self,
        snap: VirtualMachineSnapshot,
        vmi: VirtualMachineInstance | None,
        online: Online,
        content: VirtualMachineSnapshotContent,
        missing: list[Backup],
    ) -> str:
        """Freeze (a running VM with an agent), create the VolumeSnapshots, thaw; the error."""
        freeze = vmi is not None and online.running and online.agent
        started = time.monotonic()
        if freeze and vmi is not None:
            error = await self._freeze(snap, vmi)
            if error:
                await self._thaw(snap, vmi)
                return error
        try:
            for backup in missing:
                body = volume_snapshot_body(content, backup=backup, snapshot_uid=snap.uid)
                await self._kube.create_volume_snapshot(body)
        finally:
            if freeze and vmi is not None:
                await self._thaw(snap, vmi, frozen_for=time.monotonic() - started)
        return ""

    async def _freeze(self, snap: VirtualMachineSnapshot, vmi: VirtualMachineInstance) -> str:
        deadline = failure_deadline(snap)
        unfreeze = max(MIN_UNFREEZE, deadline if deadline > 0 else MIN_UNFREEZE)
        budget = freeze_budget(snap, self._clock(), cap=self._timing.freeze_timeout)
        try:
            async with asyncio.timeout(budget):
                await self._kube.freeze(vmi, unfreeze_seconds=unfreeze)
        except TimeoutError:
            msg = f"freezing the guest's filesystems timed out after {budget:.3g}s"
            self._recorder.event(snap, EventType.WARNING, "FreezeFailed", msg)
            return msg
        except (ApiError, TransportError) as e:
            msg = f"freezing the guest's filesystems failed: {e}"
            self._recorder.event(snap, EventType.WARNING, "FreezeFailed", msg)
            return msg
        log.info("guest_frozen", vmi=vmi.key)
        self._recorder.event(
            snap, EventType.NORMAL, "GuestFrozen", f"froze {vmi.name}'s filesystems"
        )
        return ""

    async def _thaw(
        self,
        snap: VirtualMachineSnapshot,
        vmi: VirtualMachineInstance | None,
        *,
        frozen_for: float | None = None,
    ) -> None:
        if vmi is None:
            return
        try:
            await self._kube.unfreeze(vmi)
        except NotFound:
            return
        log.info("guest_thawed", vmi=vmi.key, frozen_seconds=frozen_for)
        took = f" after {frozen_for:.3f}s" if frozen_for is not None else ""
        self._recorder.event(
            snap, EventType.NORMAL, "GuestThawed", f"thawed {vmi.name}'s filesystems{took}"
        )

    async def _write(self, snap: VirtualMachineSnapshot, status: Any) -> None:
        new = dataclasses.replace(snap, status=status)
        if new.status == snap.status:
            return
        try:
            refresh = refresher(self._client, VMSNAPSHOTS, VirtualMachineSnapshot, snap.key)
            await self._writer.write_status(snap, new, refresh=refresh)
        except NotFound:
            return
        if new.phase != snap.phase:
            log.info("vmsnapshot_phase", phase=str(new.phase))
            err = status.error.message if status.error else None
            kind = EventType.WARNING if err and new.phase == "Failed" else EventType.NORMAL
            self._recorder.event(
                snap, kind, f"VirtualMachineSnapshot{new.phase}", err or f"phase {new.phase}"
            )


def _online(vmi: VirtualMachineInstance | None) -> Online:
    if vmi is None or vmi.status.phase != VMIPhase.RUNNING:
        return Online()
    agent = vmi.status.condition_is_true(VMIConditionType.AGENT_CONNECTED)
    return Online(running=True, agent=agent, frozen=vmi.status.fs_freeze_status == "frozen")


def _refusal(snap: VirtualMachineSnapshot, vm: VirtualMachine | None) -> str:
    if not snap.spec.source.is_vm():
        return "spec.source: only a kubevirt.io VirtualMachine can be snapshotted"
    if vm is None and not snap.status.virtual_machine_snapshot_content_name:
        return f"spec.source: VirtualMachine {snap.spec.source.name} does not exist"
    return ""


def _plan_from_content(
    content: VirtualMachineSnapshotContent, snap: VirtualMachineSnapshot
) -> VolumePlan:
    backups = tuple(
        Backup(
            volume=b.volume_name or "",
            claim=ClaimInfo(name=b.persistent_volume_claim.metadata.name or "", exists=True),
        )
        for b in content.spec.volume_backups
    )
    volumes = snap.status.snapshot_volumes
    return VolumePlan(backups=backups, excluded=volumes.excluded_volumes if volumes else ())


def _claim_info(
    name: str,
    raw: Mapping[str, Any] | None,
    storage: list[Mapping[str, Any]],
    snap_classes: list[Mapping[str, Any]],
) -> ClaimInfo:
    if raw is None:
        return ClaimInfo(name=name, exists=False)
    spec = raw.get("spec") or {}
    sc_name = spec.get("storageClassName")
    sc = next((c for c in storage if (c.get("metadata") or {}).get("name") == sc_name), None)
    provisioner = sc.get("provisioner") if sc is not None else None
    return ClaimInfo(
        name=name,
        exists=True,
        spec=spec,
        labels=(raw.get("metadata") or {}).get("labels") or {},
        storage_class=sc_name,
        snapshot_class=pick_snapshot_class(provisioner, snap_classes),
    )
