"""The VMI replica set controller: keeps `spec.replicas` VMIs of each
VirtualMachineInstanceReplicaSet, adopting and releasing VMIs by label, and its status true.

    reconcile(key): set and its namespace's VMIs from the caches → claim (adopt / release)
                    → expectations satisfied? → plan_scale() → creations (slow start) or
                    deletions → one status write (ReplicaFailure on a scale error)

Expectations are set before each burst of writes and lowered by the VMI informer's events
(or at once for a write that failed), so a sync that runs before the cache has caught up
never creates or deletes twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence

import structlog

from controller.config import TimingConfig
from controller.deps import Deps
from controller.owned import WRITE_TIMEOUT, FleetReconciler
from controller.replicaset.logic import (
    PAUSED_EVENT,
    RESUMED_EVENT,
    Claim,
    Failures,
    ReplicaSet,
    ScaleError,
    check_spec,
    claim,
    failed_members,
    next_status,
    owner_reference,
    plan_scale,
    vmi_body,
)
from controller.vm.logic import Backoff
from shared.kube import (
    NAMESPACE_INDEX,
    VMIRSS,
    VMIS,
    ApiError,
    Conflict,
    EventType,
    Expectations,
    Handlers,
    NotFound,
    StatusWriter,
    Store,
    TransportError,
    WorkQueue,
)
from shared.model import OwnerReference, VirtualMachineInstance

log = structlog.get_logger("controller.replicaset")

VMI = VirtualMachineInstance


class ReplicaSetController(FleetReconciler[ReplicaSet]):
    """Reconciles VirtualMachineInstanceReplicaSets against their VMIs."""

    kind = "vmirs"
    synchronized_on = "replicasets"
    model = ReplicaSet
    resource = VMIRSS
    owned = VMIS
    invalid_event = "replicaset_invalid"

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        expectations: Expectations,
        writer: StatusWriter[ReplicaSet],
        timing: TimingConfig,
    ) -> None:
        super().__init__(deps, queue=queue, expectations=expectations, writer=writer)
        self._backoff = Backoff(base=timing.start_backoff_base, cap=timing.start_backoff_max)
        self._failures: dict[str, Failures] = {}

    # ---- event handlers -----------------------------------------------------------------

    def _owners(self) -> Store[ReplicaSet]:
        return self._informers.replicasets.store

    def _check(self, owner: ReplicaSet) -> None:
        check_spec(owner)

    def _forget(self, key: str) -> None:
        self._failures.pop(key, None)

    def handlers(self) -> tuple[Handlers[ReplicaSet], Handlers[VMI]]:
        """Callbacks for the replica set and VMI informers."""
        vmi: Handlers[VMI] = Handlers(
            on_add=self._vmi_added, on_update=self._vmi_updated, on_delete=self._owned_deleted
        )
        return self.owner_handlers(), vmi

    def _wake_selecting(self, vmi: VMI) -> None:
        """An orphan changed: every set whose selector matches it may adopt it."""
        for rs in self._informers.replicasets.store.by_index(NAMESPACE_INDEX, vmi.namespace):
            selector = rs.spec.selector
            if selector is not None and selector.matches(vmi.metadata.labels):
                self.enqueue(rs.key)

    def _vmi_added(self, vmi: VMI) -> None:
        if vmi.metadata.is_deleting:
            self._owned_deleted(vmi)
            return
        key = self._owner(vmi)
        if key is not None:
            self.expectations.creation_observed(key)
            self.enqueue(key)
        elif vmi.metadata.controller_ref() is None:
            self._wake_selecting(vmi)

    def _vmi_updated(self, old: VMI, new: VMI) -> None:
        if new.metadata.is_deleting:
            self._owned_deleted(new)
            return
        old_key, key = self._owner(old), self._owner(new)
        if old_key != key:
            self.enqueue(old_key)
        if key is not None:
            self.enqueue(key)
        elif new.metadata.controller_ref() is None and (
            old.metadata.labels != new.metadata.labels or old_key is not None
        ):
            self._wake_selecting(new)

    # ---- reconcile ----------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        rs = self._current(key)
        if rs is None:
            return
        vmis = self._informers.vmis.store.by_index(NAMESPACE_INDEX, rs.namespace)
        claimed = claim(rs, (self._vmi_recent.latest(v) or v for v in vmis))
        owned = list(claimed.owned) + await self._adopt_and_release(rs, claimed)
        error: ScaleError | None = None
        hold: float | None = None
        if self.expectations.satisfied(key):
            error, hold = await self._scale(rs, owned)
        await self._write_status(rs, owned, error)
        if hold is not None:
            self.queue.add_after(key, hold)
        if error is not None:
            self.queue.add_rate_limited(key)

    async def _scale(
        self, rs: ReplicaSet, owned: Sequence[VMI]
    ) -> tuple[ScaleError | None, float | None]:
        now = self._clock()
        failures = self._failures.get(rs.key, Failures())
        plan = plan_scale(rs, owned, hold=failures.hold(now=now, backoff=self._backoff))
        self._failures[rs.key] = failures.after(failed_members(plan.clean), now)
        error = await self._delete(rs, [*plan.delete, *plan.clean])
        if error is None and plan.create:
            error = await self._create(rs, plan.create)
        return error, plan.hold

    async def _create(self, rs: ReplicaSet, count: int) -> ScaleError | None:
        """Create `count` members in slow-start batches (1, 2, 4 …) that stop at the first
        failure, as Kubernetes' ReplicaSet does: a quota refusal costs one request."""
        body = vmi_body(rs)
        self.expectations.expect_creations(rs.key, count)
        done, batch = 0, 1
        while done < count:
            size = min(batch, count - done)
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(self._create_one(rs, body)) for _ in range(size)]
            done += size
            errors = [e for t in tasks if (e := t.result()) is not None]
            if errors:
                for _ in range(count - done):  # never attempted: never observed
                    self.expectations.creation_observed(rs.key)
                return ScaleError(reason="FailedCreate", message=errors[0])
            batch *= 2
        return None

    async def _create_one(self, rs: ReplicaSet, body: dict[str, object]) -> str | None:
        try:
            async with asyncio.timeout(WRITE_TIMEOUT):
                created = await self._client.create(VMIS, body, namespace=rs.namespace)
        except (ApiError, TransportError, TimeoutError) as e:
            self.expectations.creation_observed(rs.key)
            message = f"Error creating virtual machine instance: {e}"
            self._recorder.event(rs, EventType.WARNING, "FailedCreate", message)
            return str(e)
        name = created.get("metadata", {}).get("name", "")
        log.info("vmi_created", name=name)
        message = f"Started the virtual machine by creating the new virtual machine instance {name}"
        self._recorder.event(rs, EventType.NORMAL, "SuccessfulCreate", message)
        return None

    async def _delete(self, rs: ReplicaSet, doomed: Sequence[VMI]) -> ScaleError | None:
        if not doomed:
            return None
        self.expectations.expect_deletions(rs.key, [v.uid for v in doomed])
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(self._delete_owned(rs, vmi)) for vmi in doomed]
        errors = [e for t in tasks if (e := t.result()) is not None]
        return ScaleError(reason="FailedDelete", message=errors[0]) if errors else None

    # ---- adoption -----------------------------------------------------------------------

    async def _adopt_and_release(self, rs: ReplicaSet, claimed: Claim) -> list[VMI]:
        """Patch ownerReferences: orphans that match become members (returned), members
        that stopped matching are let go. A VMI changed meanwhile is left for its event."""
        adopted: list[VMI] = []
        if claimed.adopt and await self._can_adopt(rs):
            for vmi in claimed.adopt:
                refs = (*vmi.metadata.owner_references, owner_reference(rs))
                if await self._patch_owners(vmi, refs):
                    adopted.append(vmi)
                    log.info("vmi_adopted", name=vmi.name)
        for vmi in claimed.release:
            refs = tuple(r for r in vmi.metadata.owner_references if r.uid != rs.uid)
            if await self._patch_owners(vmi, refs):
                log.info("vmi_released", name=vmi.name)
        return adopted

    async def _can_adopt(self, rs: ReplicaSet) -> bool:
        """A fresh read: a set being deleted (or replaced) adopts nothing."""
        try:
            async with asyncio.timeout(WRITE_TIMEOUT):
                raw = await self._client.get(VMIRSS, rs.name, namespace=rs.namespace)
        except NotFound:
            return False
        fresh = ReplicaSet.from_dict(raw)
        return fresh.uid == rs.uid and not fresh.metadata.is_deleting

    async def _patch_owners(self, vmi: VMI, refs: Sequence[OwnerReference]) -> bool:
        owners = [r.to_dict() for r in refs]
        patch = {
            "metadata": {
                "resourceVersion": vmi.metadata.resource_version,
                "ownerReferences": owners,
            }
        }
        try:
            async with asyncio.timeout(WRITE_TIMEOUT):
                await self._client.patch(VMIS, vmi.name, patch, namespace=vmi.namespace)
        except (NotFound, Conflict):
            return False
        return True

    # ---- status -------------------------------------------------------------------------

    async def _write_status(
        self, rs: ReplicaSet, owned: Sequence[VMI], error: ScaleError | None
    ) -> None:
        status = next_status(rs, owned, error=error, now=self._clock())
        if status.ready_replicas >= rs.spec.wanted:
            self._failures.pop(rs.key, None)
        if status == rs.status:
            return
        written = await self._write_owner(rs, dataclasses.replace(rs, status=status))
        if written is None:
            return
        was_paused = rs.status.condition("ReplicaPaused") is not None
        if bool(rs.spec.paused) != was_paused:
            reason, message = (
                (PAUSED_EVENT, "Paused") if rs.spec.paused else (RESUMED_EVENT, "Resumed")
            )
            self._recorder.event(written, EventType.NORMAL, reason, message)
