"""The evacuation part of the migration controller: VMIs that a drain marked for
evacuation (`status.evacuationNodeName`, set by the eviction webhook) get a VMIM each,
within the parallel-migration limits; the mark is cleared once the VMI runs elsewhere
(controller/drain/evacuation_logic.py decides).

Keyed by the VMI's key. A VMIM created here and not yet in the cache is held in a ledger,
so a second sync never creates another one and the limits count it.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable

import structlog

from controller.config import MigrationConfig
from controller.deps import Deps
from controller.drain.evacuation_logic import evacuation_migration, plan_evacuation
from controller.informers import VMI_KEY_INDEX
from controller.migration.logic import Capacity
from controller.reconcile import Reconciler, live, refresher
from shared.kube import (
    VMIMS,
    VMIS,
    EventType,
    Handlers,
    NotFound,
    WorkQueue,
)
from shared.model import VirtualMachineInstance, VirtualMachineInstanceMigration

log = structlog.get_logger("controller.evacuation")
Migration = VirtualMachineInstanceMigration
# A VMIM created here that the cache has not shown for this long is no longer counted.
LEDGER_TTL = 60.0


class EvacuationController(Reconciler):
    """Creates the VMIMs that move marked VMIs off the node being drained."""

    kind = "vmi"

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        config: MigrationConfig | Callable[[], MigrationConfig],
    ) -> None:
        super().__init__(deps, queue)
        self._config_of = live(config)
        # VMI key → (source node, monotonic time) of VMIMs created but not yet cached.
        self._created: dict[str, tuple[str, float]] = {}

    def handlers(self) -> tuple[Handlers[VirtualMachineInstance], Handlers[Migration]]:
        """Callbacks for the VMI and VMIM informers."""
        vmis: Handlers[VirtualMachineInstance] = Handlers(
            on_add=self._vmi_changed, on_update=lambda old, new: self._vmi_changed(new)
        )
        migrations: Handlers[Migration] = Handlers(
            on_add=self._migration_added,
            on_update=self._migration_updated,
            on_delete=lambda m: self._wake_marked(),
        )
        return vmis, migrations

    def _vmi_changed(self, vmi: VirtualMachineInstance) -> None:
        if vmi.status.evacuation_node_name:
            self.enqueue(vmi.key)

    def _migration_added(self, m: Migration) -> None:
        self._created.pop(m.vmi_key, None)
        self.enqueue(m.vmi_key)

    def _migration_updated(self, old: Migration, new: Migration) -> None:
        if new.is_final() and not old.is_final():
            self._wake_marked()

    def _wake_marked(self) -> None:
        """A migration ended: every marked VMI may now have room (or be done)."""
        for vmi in self._informers.vmis.store.list():
            self._vmi_changed(vmi)

    def unfinished(self) -> Capacity:
        """VMIMs not final (cache plus ledger), cluster-wide and by source node."""
        by_node: Counter[str] = Counter()
        keys: set[str] = set()
        for m in self._informers.migrations.store.list():
            if m.is_final():
                continue
            keys.add(m.vmi_key)
            vmi = self._informers.vmis.store.get(m.vmi_key)
            by_node[(vmi.status.node_name if vmi is not None else None) or ""] += 1
        now = time.monotonic()
        for key, (node, since) in list(self._created.items()):
            if now - since > LEDGER_TTL:
                self._created.pop(key, None)
            elif key not in keys:
                by_node[node] += 1
        return Capacity(in_flight=sum(by_node.values()), outbound=dict(by_node))

    async def sync(self, key: str) -> None:
        vmi = self._vmi_recent.latest(self._informers.vmis.store.get(key))
        if vmi is None or key in self._created:
            return
        migrations = self._informers.migrations.store.by_index(VMI_KEY_INDEX, key)
        plan = plan_evacuation(
            vmi,
            migrations,
            unfinished=self.unfinished(),
            config=self._config_of(),
            now=self._clock(),
        )
        if plan.clear_mark:
            await self._clear_mark(vmi)
        if plan.create_migration:
            await self._create_migration(vmi)
        if plan.requeue_after is not None:
            self.queue.add_after(key, plan.requeue_after)

    async def _create_migration(self, vmi: VirtualMachineInstance) -> None:
        node = vmi.status.evacuation_node_name or ""
        self._created[vmi.key] = (node, time.monotonic())
        try:
            created = await self._client.create(
                VMIMS, evacuation_migration(vmi, node), namespace=vmi.metadata.namespace
            )
        except BaseException:
            self._created.pop(vmi.key, None)
            raise
        name = created.get("metadata", {}).get("name")
        log.info("evacuation_migration_created", vmim=name, node=node)
        message = f"Migrating off node {node} being drained (VMIM {name})"
        self._recorder.event(vmi, EventType.NORMAL, "EvacuationMigration", message)

    async def _clear_mark(self, vmi: VirtualMachineInstance) -> None:
        status = dataclasses.replace(vmi.status, evacuation_node_name=None)
        refresh = refresher(self._client, VMIS, VirtualMachineInstance, vmi.key)
        try:
            written = await self._vmi_writer.write_status(
                vmi, dataclasses.replace(vmi, status=status), refresh=refresh
            )
        except NotFound:
            return
        self._vmi_recent.remember(written)
        log.info("evacuation_done", node=vmi.status.evacuation_node_name)
