"""The VMI controller: creates launcher pods, moves VMIs to Scheduled, tears them down.

    reconcile(key): VMI from the cache (or our newer write) → expectations satisfied?
                    → plan_vmi() → pod deletes / creates → one metadata + status write

Writes per VMI from creation to Scheduled: a status patch after the pod is created
(Pending + Scheduling), then at the handoff a metadata patch (node label, finalizer) and a
status patch (Scheduled): the VMI CRD serves status as a subresource, which ignores
metadata, so the handoff cannot be one write (see shared/kube/status.py). The writer makes
one attempt: a Conflict requeues the key and the sync is re-planned from fresh state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime

import structlog

from controller.config import TimingConfig
from controller.deps import Deps
from controller.errors import SyncError
from controller.informers import VMI_UID_INDEX
from controller.reconcile import PodWriter, Reconciler, apply_metadata, live, refresher
from controller.services.template import TemplateService
from controller.services.volumes import ClaimReason, read_claims
from controller.services.volumes.claims import (
    Claim,
    claim_names,
    claim_volume_status,
    resized_claims,
    unbound_claims,
)
from controller.transitions import vmi_condition
from controller.vmi import vmstate
from controller.vmi.hotplug import HotplugAttachments, hotplugged
from controller.vmi.logic import plan_vmi
from controller.vmi.plan import VMIPlan
from shared.kube import (
    VMIS,
    Handlers,
    KubeError,
    NotFound,
    StatusWriter,
    WorkQueue,
)
from shared.kube.vmi_events import vmi_transition_events
from shared.labels import POD_SCHEDULED, VMI_FINALIZER
from shared.launcherpod import LauncherPod
from shared.model import (
    ConditionStatus,
    VirtualMachineInstance,
    VMIConditionType,
    VMIPhase,
    VMIStatus,
)
from shared.model.datavolume import DataVolume
from shared.vmstate import vmi_claim as state_claim

log = structlog.get_logger("controller.vmi")

# Synchronized=False reasons a later successful sync clears (not the final ones).
TRANSIENT_REASONS = frozenset(
    {
        "FailedCreate",
        "FailedDelete",
        "SyncFailed",
        vmstate.FAILED_REASON,
        *(str(r) for r in ClaimReason),
    }
)

# The phases in which a VMI's pod runs, so its claims are bound and can be described.
CLAIMS_DESCRIBED_IN = frozenset({VMIPhase.SCHEDULED, VMIPhase.RUNNING})


class VMIController(Reconciler):
    """Reconciles VirtualMachineInstances against their launcher pods."""

    kind = "vmi"
    synchronized_on = "vmis"

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        pods: PodWriter,
        writer: StatusWriter[VirtualMachineInstance],
        templates: TemplateService | Callable[[], TemplateService],
        timing: TimingConfig,
        hotplugs: HotplugAttachments | None = None,
    ) -> None:
        super().__init__(deps, queue)
        self._hotplugs = hotplugs
        self._pods = pods
        self._writer = writer
        self._templates_of = live(templates)
        self._timing = timing

    async def prepare(self, namespace: str | None) -> None:
        """Before the workers start, as a new leader: VMIs that still have attachment pods
        are held (best effort: without it such a pod waits for its launcher pod to go)."""
        if self._hotplugs is None:
            return
        try:
            await self._hotplugs.prime(namespace)
        except (KubeError, TimeoutError) as exc:
            log.warning("hotplug_prime_failed", error=str(exc))

    # ---- event handlers (enqueue only) --------------------------------------------------

    def handlers(self) -> tuple[Handlers[VirtualMachineInstance], Handlers[LauncherPod]]:
        """Callbacks for the VMI and pod informers."""
        vmi_handlers: Handlers[VirtualMachineInstance] = Handlers(
            on_add=lambda v: self.enqueue(v.key),
            on_update=self._vmi_updated,
            on_delete=self._vmi_deleted,
        )
        pod_handlers: Handlers[LauncherPod] = Handlers(
            on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted
        )
        return vmi_handlers, pod_handlers

    def datavolume_handlers(self) -> Handlers[DataVolume]:
        """A DataVolume's changes re-sync the VMIs whose volumes name it (they wait for it)."""
        return Handlers(
            on_add=self._datavolume_changed,
            on_update=lambda old, new: self._datavolume_changed(new),
        )

    def _datavolume_changed(self, dv: DataVolume) -> None:
        for vmi in self._informers.vmis.store.list():
            if vmi.namespace == dv.namespace and any(
                v.data_volume is not None and v.data_volume.name == dv.name
                for v in vmi.spec.volumes
            ):
                self.enqueue(vmi.key)

    def claim_handlers(self) -> Handlers[Claim]:
        """A claim whose capacity changed (expanded) re-syncs the VMIs whose volumes name it."""
        return Handlers(on_update=self._claim_changed)

    def _claim_changed(self, old: Claim, new: Claim) -> None:
        if (old.capacity, old.requests) == (new.capacity, new.requests):
            return
        for vmi in self._informers.vmis.store.list():
            if vmi.namespace == new.namespace and new.name in claim_names(vmi, hotplugged=True):
                self.enqueue(vmi.key)

    def _vmi_updated(self, old: VirtualMachineInstance, new: VirtualMachineInstance) -> None:
        self._vmi_recent.observe(new)
        self.enqueue(new.key)

    def _vmi_deleted(self, vmi: VirtualMachineInstance) -> None:
        self._pods.expectations.delete(vmi.key)
        self._vmi_recent.forget(vmi.key)
        if self._hotplugs is not None:
            self._hotplugs.forget(vmi.uid)

    def _pod_added(self, pod: LauncherPod) -> None:
        if pod.vmi_key and not pod.is_migration_target:
            self._pods.expectations.creation_observed(pod.vmi_key)
        self.enqueue(pod.vmi_key)

    def _pod_updated(self, old: LauncherPod, new: LauncherPod) -> None:
        if old is not new and old == new:
            return  # nothing this controller decides by changed (a resync passes old is new)
        if new.deleting and not old.deleting and new.vmi_key:
            self._pods.expectations.deletion_observed(new.vmi_key, new.uid)
        self.enqueue(new.vmi_key)

    def _pod_deleted(self, pod: LauncherPod) -> None:
        if pod.vmi_key:
            self._pods.expectations.deletion_observed(pod.vmi_key, pod.uid)
        self.enqueue(pod.vmi_key)

    # ---- reconcile ----------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        vmi = self._vmi_recent.latest(self._informers.vmis.store.get(key))
        if vmi is None:
            self._vmi_recent.forget(key)  # gone: a write answered after its delete event
            return
        if not self._pods.expectations.satisfied(key):
            log.debug("expectations_pending", pending=str(self._pods.expectations.pending(key)))
            return
        pods = self._informers.pods.store.by_index(VMI_UID_INDEX, vmi.uid)
        now = self._clock()
        plan = plan_vmi(
            vmi,
            pods,
            now=now,
            unschedulable_timeout=self._timing.vmi_unschedulable_timeout,
            handler_down=self._handler_down(vmi.status.node_name, now),
            released=self._released(pods, now),
        )
        plan = await self._name_unbound_claims(vmi, plan)
        plan = await self._hotplug(vmi, plan, pods)
        plan = await self._describe_claims(vmi, plan)
        try:
            await self._apply_pods(vmi, plan)
        except SyncError as e:
            await self._write(vmi, self._with_sync_error(vmi, e))
            raise
        new = dataclasses.replace(
            vmi,
            metadata=apply_metadata(
                vmi.metadata, VMI_FINALIZER, keep=plan.finalizer, labels=plan.labels
            ),
            status=self._clear_sync_error(plan.status),
        )
        if plan.status.is_final() and not vmi.status.is_final():
            cond = plan.status.condition(VMIConditionType.SYNCHRONIZED)
            log.warning("vmi_failed", reason=plan.status.reason, why=cond.message if cond else None)
        await self._write(vmi, new)
        if plan.requeue_after is not None:
            self.queue.add_after(key, plan.requeue_after)

    async def _hotplug(
        self, vmi: VirtualMachineInstance, plan: VMIPlan, pods: list[LauncherPod]
    ) -> VMIPlan:
        """A Running VMI's hotplugged volumes: attachment pods and volumeStatus."""
        if (
            self._hotplugs is None
            or plan.status.phase is not VMIPhase.RUNNING
            or vmi.metadata.is_deleting
            or not (
                hotplugged(vmi)
                or any(e.hotplug_volume for e in vmi.status.volume_status)
                or self._hotplugs.holding(vmi.uid)
            )
        ):
            return plan
        node = plan.status.node_name
        owner = next(
            (p for p in pods if p.node_name == node and p.uid in plan.status.active_pods),
            None,
        )
        if owner is None:
            return plan
        status, again = await self._hotplugs.sync(vmi, owner)
        requeue = plan.requeue_after
        if again is not None:
            requeue = again if requeue is None else min(requeue, again)
        return dataclasses.replace(
            plan,
            status=dataclasses.replace(plan.status, volume_status=status),
            requeue_after=requeue,
        )

    async def _describe_claims(self, vmi: VirtualMachineInstance, plan: VMIPlan) -> VMIPlan:
        """From the handoff on, status.volumeStatus carries each bound claim's info (its
        access modes decide LiveMigratable); read once per claim, not at every sync, then
        kept in step with the claim's capacity from the informer's cache."""
        has_claims = claim_names(vmi) or state_claim(vmi) is not None
        if plan.status.phase not in CLAIMS_DESCRIBED_IN or not has_claims:
            return plan
        described = await claim_volume_status(self._client, vmi, plan.status.volume_status)
        store = self._informers.claims.store
        resized = resized_claims(
            described or plan.status.volume_status,
            lambda name: store.get(f"{vmi.namespace}/{name}"),
        )
        described = resized or described
        if described is None:
            return plan
        return dataclasses.replace(
            plan, status=dataclasses.replace(plan.status, volume_status=described)
        )

    async def _name_unbound_claims(self, vmi: VirtualMachineInstance, plan: VMIPlan) -> VMIPlan:
        """An unschedulable launcher pod of a VMI with claims: the PodScheduled condition
        names the claims not bound (the scheduler's message does not)."""
        cond = plan.status.condition(POD_SCHEDULED)
        if cond is None or cond.status != ConditionStatus.FALSE or not claim_names(vmi):
            return plan
        unbound = await unbound_claims(self._client, vmi)
        if not unbound:
            return plan
        status = vmi_condition(
            plan.status,
            POD_SCHEDULED,
            ConditionStatus.FALSE,
            reason=cond.reason or "",
            message=f"{'; '.join(unbound)}: {cond.message or ''}",
            now=self._clock(),
        )
        return dataclasses.replace(plan, status=status)

    def _handler_down(self, node_name: str | None, now: datetime) -> bool:
        """The handler of `node_name` heartbeated once and not within the timeout (as the
        node controller judges it: it owns the VMIs of such a node)."""
        node = self._informers.nodes.store.get(node_name) if node_name else None
        return node is not None and node.handler_down(
            now=now, timeout=self._timing.heartbeat_timeout
        )

    def _released(self, pods: list[LauncherPod], now: datetime) -> frozenset[str]:
        """UIDs of pods on dead nodes known stopped (controller/node/logic.py's rule)."""
        timeout, released = self._timing.heartbeat_timeout, set()
        for pod in pods:
            node = self._informers.nodes.store.get(pod.node_name) if pod.node_name else None
            if node is None or pod.terminal:
                continue
            if node.pod_gone(pod, dead=node.dead(now=now, timeout=timeout)):
                released.add(pod.uid)
        return frozenset(released)

    async def _apply_pods(self, vmi: VirtualMachineInstance, plan: VMIPlan) -> None:
        await self._pods.delete(vmi.key, plan.delete_pods, involved=vmi)
        if plan.create_pod:
            state_class = self._templates_of().config.vm_state_storage_class
            await vmstate.ensure_claim(self._client, vmi, storage_class=state_class)
            claims = await read_claims(self._client, vmi)  # SyncError naming a missing claim
            pod = self._templates_of().launcher_pod(vmi, claims=claims, attempt=plan.pod_attempt)
            await self._pods.create(vmi.key, pod, involved=vmi)

    async def _write(self, old: VirtualMachineInstance, new: VirtualMachineInstance) -> None:
        """Patch only what changed (most syncs change nothing and cost no write)."""
        if old.status == new.status and (old.metadata.labels, old.metadata.finalizers) == (
            new.metadata.labels,
            new.metadata.finalizers,
        ):
            return
        try:
            refresh = refresher(self._client, VMIS, VirtualMachineInstance, old.key)
            written = await self._writer.write(old, new, refresh=refresh)
        except NotFound:
            return  # deleted meanwhile; its delete event cleans up
        if written is not old:
            self._vmi_recent.remember(written)
            for type_, reason, message in vmi_transition_events(old.status, written.status):
                self._recorder.event(written, type_, reason, message)

    def _with_sync_error(self, vmi: VirtualMachineInstance, e: SyncError) -> VirtualMachineInstance:
        status = vmi_condition(
            vmi.status,
            VMIConditionType.SYNCHRONIZED,
            ConditionStatus.FALSE,
            reason=e.reason,
            message=e.message,
            now=self._clock(),
        )
        return dataclasses.replace(vmi, status=status)

    @staticmethod
    def _clear_sync_error(status: VMIStatus) -> VMIStatus:
        """A successful sync clears a transient Synchronized=False (not a final failure's)."""
        cond = status.condition(VMIConditionType.SYNCHRONIZED)
        if cond is None or status.is_final() or cond.reason not in TRANSIENT_REASONS:
            return status
        return status.without_condition(VMIConditionType.SYNCHRONIZED)
