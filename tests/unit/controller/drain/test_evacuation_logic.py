"""Evacuation decisions: a marked VMI gets one VMIM within the parallel-migration limits,
External ones only stay marked, failures are retried after a backoff, and the mark goes
once the VMI runs elsewhere."""

from __future__ import annotations

import dataclasses

import pytest

from controller.config import MigrationConfig
from controller.drain.evacuation_logic import (
    EvacuationPlan,
    evacuation_migration,
    plan_evacuation,
)
from controller.migration.logic import Capacity
from shared.labels import EVACUATION_ANNOTATION
from shared.model import (
    EvictionStrategy,
    MigrationState,
    PhaseTransition,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMIConditionType,
    VMIPhase,
)
from tests.unit.controller.builders import NOW, ago, condition, make_migration, make_vmi

CONFIG = MigrationConfig(parallel_per_cluster=5, outbound_per_node=2)
NODE = "node01"


def marked(
    *, node: str = NODE, strategy: EvictionStrategy = EvictionStrategy.LIVE_MIGRATE
) -> VirtualMachineInstance:
    conds = (condition(VMIConditionType.LIVE_MIGRATABLE),)
    v = make_vmi(phase=VMIPhase.RUNNING, node=node, conditions=conds)
    spec = dataclasses.replace(v.spec, eviction_strategy=strategy)
    return dataclasses.replace(
        v, spec=spec, status=dataclasses.replace(v.status, evacuation_node_name=NODE)
    )


def failed_evacuation(seconds_ago: float) -> VirtualMachineInstanceMigration:
    m = make_migration(phase="Failed")
    stamp = PhaseTransition(phase="Failed", phase_transition_timestamp=ago(seconds_ago))
    meta = dataclasses.replace(m.metadata, annotations={EVACUATION_ANNOTATION: NODE})
    status = dataclasses.replace(m.status, phase_transition_timestamps=(stamp,))
    return dataclasses.replace(m, metadata=meta, status=status)


def plan(
    vmi: VirtualMachineInstance,
    migrations: list[VirtualMachineInstanceMigration] | None = None,
    unfinished: Capacity | None = None,
) -> EvacuationPlan:
    return plan_evacuation(
        vmi, migrations or [], unfinished=unfinished or Capacity(), config=CONFIG, now=NOW
    )


def test_a_marked_vmi_gets_a_migration() -> None:
    """Marked, on the node, migratable, room under the limits: one VMIM is created, named
    by the API server and annotated with the node it leaves."""
    assert plan(marked()) == EvacuationPlan(create_migration=True)
    body = evacuation_migration(marked(), NODE)
    assert body["spec"] == {"vmiName": "vm1"}
    assert body["metadata"] == {
        "generateName": "kubevirt-evacuation-",
        "namespace": "ns",
        "annotations": {EVACUATION_ANNOTATION: NODE},
    }


def test_unmarked_vmis_are_left_alone() -> None:
    """No evacuationNodeName: nothing."""
    v = make_vmi(phase=VMIPhase.RUNNING, node=NODE)
    assert plan(v) == EvacuationPlan()


@pytest.mark.parametrize(
    "unfinished",
    [
        pytest.param(Capacity(in_flight=5, outbound={"node02": 5}), id="cluster-limit"),
        pytest.param(Capacity(in_flight=2, outbound={NODE: 2}), id="node-limit"),
    ],
)
def test_limits_hold_creation_back(unfinished: Capacity) -> None:
    """At the cluster-wide or per-node limit, nothing is created; it is looked at again."""
    result = plan(marked(), unfinished=unfinished)
    assert not result.create_migration and result.requeue_after is not None


def test_an_unfinished_migration_is_waited_for() -> None:
    """A VMIM of the VMI that has not finished: no second one."""
    assert plan(marked(), [make_migration(phase="Running")]) == EvacuationPlan()


def test_external_vmis_stay_marked_only() -> None:
    """External: someone else moves the VMI; no VMIM is created."""
    assert plan(marked(strategy=EvictionStrategy.EXTERNAL)) == EvacuationPlan()


def test_failed_evacuations_are_retried_after_a_backoff() -> None:
    """A failed evacuation VMIM: the next waits 5 s, doubling with each failure."""
    waiting = plan(marked(), [failed_evacuation(2)])
    assert not waiting.create_migration and waiting.requeue_after == pytest.approx(3)
    twice = plan(marked(), [failed_evacuation(8), failed_evacuation(9)])
    assert twice.requeue_after == pytest.approx(2)
    assert plan(marked(), [failed_evacuation(6)]).create_migration


def test_the_mark_is_cleared_once_the_vmi_left() -> None:
    """Running on another node with no unfinished migration: the mark goes."""
    assert plan(marked(node="node02"), [make_migration(phase="Succeeded")]) == EvacuationPlan(
        clear_mark=True
    )
    assert plan(marked(node="node02"), [make_migration(phase="Running")]) == EvacuationPlan()


def test_no_second_migration_while_the_target_takes_over() -> None:
    """The VMIM Succeeded but status.nodeName still names the drained node (the target
    handler has not taken the VMI over yet): no new VMIM, the mark stays until it has."""
    v = marked()
    state = MigrationState(migration_uid="m", completed=True, source_node=NODE, target_node="n2")
    v = dataclasses.replace(v, status=dataclasses.replace(v.status, migration_state=state))
    assert plan(v, [make_migration(phase="Succeeded")]) == EvacuationPlan()
