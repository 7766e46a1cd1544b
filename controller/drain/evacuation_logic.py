"""Evacuation decisions: (a VMI marked for evacuation, its migrations, the migrations in
flight, now) → create a VMIM, clear the mark, or wait.

A drain's eviction marks a VMI (`status.evacuationNodeName`, shared/eviction.py); the
evacuation controller then moves it off that node with an ordinary VMIM, which the
migration controller runs like any other. Creation is bounded: no more VMIMs that have
not finished (pending ones included) than the parallel-migration limits, cluster-wide
and from the node being evacuated, so a drain of a full node queues no flood of VMIMs.
A failed evacuation migration is retried after a backoff (5 s doubling, at most 5 min).
Once the VMI runs on another node, and no migration of it is unfinished, the mark goes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from controller.config import MigrationConfig
from controller.migration.logic import Capacity
from shared.eviction import migrates_on_eviction
from shared.labels import EVACUATION_ANNOTATION
from shared.model import (
    API_VERSION,
    MigrationPhase,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    parse_time,
)

RETRY_BASE = 5.0
RETRY_MAX = 300.0
WAIT_FOR_CAPACITY = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class EvacuationPlan:
    """What one sync of one marked VMI does."""

    create_migration: bool = False
    clear_mark: bool = False
    requeue_after: float | None = None


def plan_evacuation(
    vmi: VirtualMachineInstance,
    migrations: Sequence[VirtualMachineInstanceMigration],
    *,
    unfinished: Capacity,
    config: MigrationConfig,
    now: datetime,
) -> EvacuationPlan:
    """The plan for one VMI (nothing unless it is marked for evacuation); `unfinished`
    counts the VMIMs not yet final, pending ones included, cluster-wide and by node."""
    node = vmi.status.evacuation_node_name
    if not node or vmi.is_final() or vmi.metadata.is_deleting:
        return EvacuationPlan()
    if any(not m.is_final() for m in migrations) or _handing_over(vmi):
        return EvacuationPlan()  # a migration has it; its events (or the VMI's) wake us
    if vmi.status.node_name != node:
        return EvacuationPlan(clear_mark=True)
    if not migrates_on_eviction(vmi, config.eviction_strategy):
        return EvacuationPlan()  # External (or no longer migratable): only marked
    wait = _retry_wait(migrations, now=now)
    if wait <= 0 and unfinished.admits(node, config):
        return EvacuationPlan(create_migration=True)
    return EvacuationPlan(requeue_after=wait if wait > 0 else WAIT_FOR_CAPACITY)


def _handing_over(vmi: VirtualMachineInstance) -> bool:
    """A migration completed (its VMIM may be Succeeded already) but the target handler
    has not taken the VMI over yet: status.nodeName still names the source."""
    state = vmi.status.migration_state
    return (
        state is not None
        and bool(state.completed)
        and state.target_node is not None
        and state.target_node != vmi.status.node_name
    )


def _retry_wait(migrations: Sequence[VirtualMachineInstanceMigration], *, now: datetime) -> float:
    """Seconds still to wait after failed evacuation migrations (0: go)."""
    failed = [
        m
        for m in migrations
        if m.status.phase_or_unset is MigrationPhase.FAILED
        and EVACUATION_ANNOTATION in m.metadata.annotations
    ]
    if not failed:
        return 0.0
    last = max(_failed_at(m) or now for m in failed)
    delay = min(RETRY_MAX, RETRY_BASE * 2.0 ** (len(failed) - 1))
    return max(0.0, delay - (now - last).total_seconds())


def _failed_at(m: VirtualMachineInstanceMigration) -> datetime | None:
    for t in reversed(m.status.phase_transition_timestamps):
        if t.phase == MigrationPhase.FAILED and t.phase_transition_timestamp:
            return parse_time(t.phase_transition_timestamp)
    created = m.metadata.creation_timestamp
    return parse_time(created) if created else None


def evacuation_migration(vmi: VirtualMachineInstance, node: str) -> dict[str, object]:
    """The VMIM that moves `vmi` off `node` (a generated name, as KubeVirt's)."""
    return {
        "apiVersion": API_VERSION,
        "kind": VirtualMachineInstanceMigration.KIND,
        "metadata": {
            "generateName": "kubevirt-evacuation-",
            "namespace": vmi.metadata.namespace,
            "annotations": {EVACUATION_ANNOTATION: node},
        },
        "spec": {"vmiName": vmi.metadata.name},
    }
