"""The migration controller: admits VMIMs under the parallel limits, creates target pods,
hands migrations to the handlers through the VMI's migrationState, follows them to the end.

Admission is counted from the cache plus a ledger of migrations this process admitted
whose new phase the cache has not shown yet; deciding and recording happen with no await
in between, so concurrent workers can never admit more than the limits allow.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable

import structlog

from controller.config import MigrationConfig
from controller.deps import Deps
from controller.informers import UID_INDEX, VMI_KEY_INDEX, VMI_UID_INDEX
from controller.migration.decentral_io import DecentralMigrations, is_decentral
from controller.migration.decentral_receive import with_vmi_blocked
from controller.migration.logic import (
    IN_FLIGHT,
    Capacity,
    MigrationInputs,
    MigrationPlan,
    plan_migration,
)
from controller.migration.policy import PolicyStamp
from controller.migration.selector import matching_nodes
from controller.migration.sync_config import SyncConfig
from controller.recent import Recent
from controller.reconcile import PodWriter, Reconciler, apply_metadata, live, refresher
from controller.services.template import TemplateService
from controller.services.volumes.claims import Claim, claim_names
from shared.kube import (
    VMIMS,
    VMIS,
    EventType,
    Handlers,
    NotFound,
    StatusWriter,
    WorkQueue,
)
from shared.kube.vmi_events import vmi_transition_events
from shared.labels import MIGRATION_FINALIZER
from shared.launcherpod import LauncherPod
from shared.model import (
    MigrationPhase,
    MigrationState,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
)
from shared.volumemigration import destination_claims

log = structlog.get_logger("controller.migration")

Migration = VirtualMachineInstanceMigration


class MigrationController(Reconciler):
    """Reconciles VirtualMachineInstanceMigrations."""

    kind = "vmim"
    synchronized_on = "migrations"

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        pods: PodWriter,
        writer: StatusWriter[Migration],
        templates: TemplateService | Callable[[], TemplateService],
        config: MigrationConfig | Callable[[], MigrationConfig],
        sync: SyncConfig | None = None,
    ) -> None:
        super().__init__(deps, queue)
        self._policy = PolicyStamp(deps.client, deps.informers.policies.store.list)
        self._pods = pods
        self._writer = writer
        self._recent: Recent[Migration] = Recent()
        self._templates_of = live(templates)
        self._config_of = live(config)
        # Migrations admitted here whose in-flight phase the cache does not show yet.
        self._admitted: dict[str, str] = {}
        # Decentralized migrations; its desk answers the synchronization endpoint.
        self.decentral = DecentralMigrations(deps.informers, sync=sync, wake=self.enqueue)

    # ---- event handlers -----------------------------------------------------------------

    def handlers(
        self,
    ) -> tuple[Handlers[Migration], Handlers[VirtualMachineInstance], Handlers[LauncherPod]]:
        """Callbacks for the VMIM, VMI and pod informers."""
        mig: Handlers[Migration] = Handlers(
            on_add=lambda m: self.enqueue(m.key),
            on_update=self._migration_updated,
            on_delete=self._migration_deleted,
        )
        vmi: Handlers[VirtualMachineInstance] = Handlers(
            on_update=lambda old, new: self._vmi_changed(new),
            on_delete=self._vmi_changed,
        )
        pod: Handlers[LauncherPod] = Handlers(
            on_add=self._pod_added, on_update=self._pod_updated, on_delete=self._pod_deleted
        )
        return mig, vmi, pod

    def _migration_updated(self, old: Migration, new: Migration) -> None:
        self._recent.observe(new)
        self.enqueue(new.key)
        for key in self.decentral.peer_keys(new):  # the other half of a decentral one
            self.enqueue(key)
        if new.is_final() and not old.is_final():
            self._wake_pending()

    def _migration_deleted(self, m: Migration) -> None:
        self._pods.expectations.delete(m.key)
        self._recent.forget(m.key)
        self._admitted.pop(m.key, None)
        self.decentral.forget(m)
        self._wake_pending()

    def _vmi_changed(self, vmi: VirtualMachineInstance) -> None:
        store = self._informers.migrations.store
        for key in store.index_keys(VMI_KEY_INDEX, vmi.key):
            self.enqueue(key)

    def _migration_key(self, pod: LauncherPod) -> str | None:
        if not pod.migration_uid:
            return None
        keys = self._informers.migrations.store.index_keys(UID_INDEX, pod.migration_uid)
        return keys[0] if keys else None

    def _pod_added(self, pod: LauncherPod) -> None:
        key = self._migration_key(pod)
        if key is not None:
            self._pods.expectations.creation_observed(key)
        self.enqueue(key)

    def _pod_updated(self, old: LauncherPod, new: LauncherPod) -> None:
        key = self._migration_key(new)
        if key is not None and new.deleting and not old.deleting:
            self._pods.expectations.deletion_observed(key, new.uid)
        self.enqueue(key)

    def _pod_deleted(self, pod: LauncherPod) -> None:
        key = self._migration_key(pod)
        if key is not None:
            self._pods.expectations.deletion_observed(key, pod.uid)
        self.enqueue(key)

    def _wake_pending(self) -> None:
        """A slot freed up: look at every migration still waiting for one."""
        for m in self._informers.migrations.store.list():
            if m.status.phase_or_unset in (MigrationPhase.UNSET, MigrationPhase.PENDING):
                self.enqueue(m.key)

    # ---- capacity -----------------------------------------------------------------------

    def capacity(self, *, exclude: str) -> Capacity:
        """In-flight migrations (cache + ledger), cluster-wide and by source node."""
        outbound: Counter[str] = Counter()
        counted: set[str] = set()
        for m in self._informers.migrations.store.list():
            if m.key == exclude or m.status.phase_or_unset not in IN_FLIGHT:
                if m.key in self._admitted and m.status.phase_or_unset.is_final():
                    self._admitted.pop(m.key, None)
                continue
            self._admitted.pop(m.key, None)
            counted.add(m.key)
            outbound[self._source_node(m)] += 1
        for key, node in self._admitted.items():
            if key != exclude and key not in counted:
                counted.add(key)
                outbound[node] += 1
        return Capacity(in_flight=len(counted), outbound=dict(outbound))

    def _source_node(self, m: Migration) -> str:
        state = m.status.migration_state
        if state is not None and state.source_node:
            return state.source_node
        vmi = self._informers.vmis.store.get(m.vmi_key)
        return (vmi.status.node_name if vmi is not None else None) or ""

    # ---- reconcile ----------------------------------------------------------------------

    async def sync(self, key: str) -> None:
        m = self._recent.latest(self._informers.migrations.store.get(key))
        if m is None:
            self._admitted.pop(key, None)
            return
        if not self._pods.expectations.satisfied(key):
            return
        vmi = self._vmi_recent.latest(self._informers.vmis.store.get(m.vmi_key))
        pods = self._informers.pods.store.by_index(VMI_UID_INDEX, vmi.uid) if vmi else []
        if is_decentral(m):
            plan = await self.decentral.plan(m, vmi, pods, now=self._clock())
            await self._apply(m, vmi, plan)
            if plan.requeue_after is not None:
                self.queue.add_after(key, plan.requeue_after)
            return
        plan = plan_migration(
            MigrationInputs(
                migration=m,
                vmi=vmi,
                pods=pods,
                capacity=self.capacity(exclude=key),
                now=self._clock(),
                config=self._config_of(),
                selector_nodes=self._selector_nodes(m, vmi),
            )
        )
        if plan.create_target_pod and vmi is not None:
            self._admitted[key] = vmi.status.node_name or ""
        await self._apply(m, vmi, plan)
        if plan.requeue_after is not None:
            self.queue.add_after(key, plan.requeue_after)

    def _selector_nodes(
        self, m: Migration, vmi: VirtualMachineInstance | None
    ) -> frozenset[str] | None:
        added = m.spec.added_node_selector
        if not added or vmi is None:
            return None
        return matching_nodes(vmi, added, self._informers.nodes.store.list())

    def _block_claims(self, vmi: VirtualMachineInstance) -> dict[str, Claim]:
        """The VMI's block-mode claims from the cache: the target pod has their devices
        (a Filesystem claim is only mounted; the target never makes a disk.img on it),
        and a volume migration's destination claims (the target makes their disk.img to
        the claim's size: docs/volume-migration.md), as are a receiving VMI's claims (a
        decentralized migration copies into them)."""
        store = self._informers.claims.store
        found = {n: store.get(f"{vmi.namespace}/{n}") for n in claim_names(vmi)}
        moved = destination_claims(vmi)
        return {n: c for n, c in found.items() if c is not None and (c.block or n in moved)}

    async def _apply(
        self, m: Migration, vmi: VirtualMachineInstance | None, plan: MigrationPlan
    ) -> None:
        await self._pods.delete(m.key, plan.delete_pods, involved=m)
        if plan.create_target_pod and vmi is not None:
            source = vmi.status.node_name or self.decentral.source_node(m)
            pod = self._templates_of().target_pod(
                vmi, m, source_node=source, claims=self._block_claims(vmi)
            )
            await self._pods.create(m.key, pod, involved=m, what="migration target pod")
        if (plan.vmi_state is not None or plan.vmi_blocked is not None) and vmi is not None:
            await self._write_vmi(vmi, plan)
        new = dataclasses.replace(
            m,
            metadata=apply_metadata(m.metadata, MIGRATION_FINALIZER, keep=plan.finalizer),
            status=plan.status,
        )
        if new == m:
            return
        try:
            refresh = refresher(self._client, VMIMS, Migration, m.key)
            written = await self._writer.write(m, new, refresh=refresh)
        except NotFound:
            return
        if written is not m:
            self._recent.remember(written)
            self._phase_event(m, written)

    def _phase_event(self, old: Migration, new: Migration) -> None:
        """KubeVirt's SuccessfulMigration / FailedMigration on the VMIM."""
        was, now = old.status.phase_or_unset, new.status.phase_or_unset
        if was == now:
            return
        if now is MigrationPhase.SUCCEEDED:
            message = "Source node reported migration succeeded"
            self._recorder.event(new, EventType.NORMAL, "SuccessfulMigration", message)
        elif now is MigrationPhase.FAILED:
            state = new.status.migration_state
            why = state.failure_reason if state and state.failure_reason else "unknown"
            message = f"Migration failed: {why}"
            self._recorder.event(new, EventType.WARNING, "FailedMigration", message)

    async def _write_vmi(self, vmi: VirtualMachineInstance, plan: MigrationPlan) -> None:
        """The plan's migrationState and DecentralizedLiveMigrationFailure on the VMI."""
        status = vmi.status
        if plan.vmi_state is not None:
            state = await self._stamped(vmi, plan.vmi_state)
            status = dataclasses.replace(status, migration_state=state)
        if plan.vmi_blocked is not None:
            status = with_vmi_blocked(status, blocked=plan.vmi_blocked, now=self._clock())
        if status == vmi.status:
            return
        new = dataclasses.replace(vmi, status=status)
        refresh = refresher(self._client, VMIS, VirtualMachineInstance, vmi.key)
        written = await self._vmi_writer.write_status(vmi, new, refresh=refresh)
        if written is not vmi:
            self._vmi_recent.remember(written)
            for type_, reason, message in vmi_transition_events(vmi.status, written.status):
                self._recorder.event(written, type_, reason, message)
        log.info("migration_vmi_status_written", vmi=vmi.key)

    async def _stamped(self, vmi: VirtualMachineInstance, state: MigrationState) -> MigrationState:
        """`state` with the migration policy: kept from the VMI's for the same migration
        (chosen at the handoff; plans do not carry it), else chosen now."""
        old = vmi.status.migration_state
        if old is not None and old.migration_uid == state.migration_uid:
            return dataclasses.replace(
                state,
                migration_policy_name=old.migration_policy_name,
                migration_configuration=old.migration_configuration,
            )
        return await self._policy.stamp(vmi, state)
