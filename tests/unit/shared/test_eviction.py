"""The eviction-strategy table: what an eviction of a launcher pod does, and which VMIs get
a PodDisruptionBudget, for every strategy (the VMI's own or the cluster default) and
migratability (the handler's LiveMigratable condition)."""

from __future__ import annotations

import dataclasses

import pytest

from shared.eviction import (
    EvictionAction,
    budget_min_available,
    effective_strategy,
    eviction_verdict,
    migrates_on_eviction,
)
from shared.model import (
    EvictionStrategy,
    MigrationState,
    VirtualMachineInstance,
    VMICondition,
    VMIConditionType,
    VMIPhase,
)
from tests.unit.controller.builders import condition, make_vmi

S = EvictionStrategy
A = EvictionAction
NODE = "node01"


def vmi(
    strategy: EvictionStrategy | None,
    *,
    migratable: bool | None = True,
    phase: VMIPhase = VMIPhase.RUNNING,
    marked: str | None = None,
) -> VirtualMachineInstance:
    conds: tuple[VMICondition, ...] = ()
    if migratable is not None:
        status = "True" if migratable else "False"
        why = {} if migratable else {"message": "volume d is a hostDisk, local to the node"}
        conds = (condition(VMIConditionType.LIVE_MIGRATABLE, status, **why),)
    v = make_vmi(phase=phase, node=NODE, conditions=conds)
    spec = dataclasses.replace(v.spec, eviction_strategy=strategy)
    st = dataclasses.replace(v.status, evacuation_node_name=marked)
    return dataclasses.replace(v, spec=spec, status=st)


TABLE = [
    pytest.param(S.NONE, True, A.ALLOW, None, id="none-migratable"),
    pytest.param(S.NONE, False, A.ALLOW, None, id="none-not-migratable"),
    pytest.param(S.LIVE_MIGRATE, True, A.EVACUATE, 1, id="livemigrate-migratable"),
    pytest.param(S.LIVE_MIGRATE, False, A.REFUSE, 1, id="livemigrate-not-migratable"),
    pytest.param(S.LIVE_MIGRATE_IF_POSSIBLE, True, A.EVACUATE, 1, id="ifpossible-migratable"),
    pytest.param(S.LIVE_MIGRATE_IF_POSSIBLE, False, A.ALLOW, None, id="ifpossible-not"),
    pytest.param(S.EXTERNAL, True, A.EVACUATE, 1, id="external-migratable"),
    pytest.param(S.EXTERNAL, False, A.EVACUATE, 1, id="external-not-migratable"),
]


@pytest.mark.parametrize(("strategy", "migratable", "action", "budget"), TABLE)
def test_strategy_table(
    strategy: EvictionStrategy, migratable: bool, action: EvictionAction, budget: int | None
) -> None:
    """Each strategy and migratability: the webhook's action and the budget's minAvailable,
    the same whether the strategy is the VMI's own or the cluster default."""
    own = vmi(strategy, migratable=migratable)
    by_default = vmi(None, migratable=migratable)
    for v, default in ((own, S.NONE), (by_default, strategy)):
        assert eviction_verdict(v, pod_node=NODE, default=default).action is action
        assert budget_min_available(v, live_pods=1, default=default) == budget


def test_the_vmi_strategy_wins_over_the_default() -> None:
    """spec.evictionStrategy, when set, is used instead of the cluster default."""
    assert effective_strategy(vmi(S.NONE), S.LIVE_MIGRATE) is S.NONE
    assert effective_strategy(vmi(None), S.EXTERNAL) is S.EXTERNAL


def test_evacuation_message_is_the_one_the_descheduler_knows() -> None:
    """An evacuating eviction says "Eviction triggered evacuation of VMI "ns/name""."""
    verdict = eviction_verdict(vmi(S.LIVE_MIGRATE), pod_node=NODE, default=S.NONE)
    assert verdict.message == 'Eviction triggered evacuation of VMI "ns/vm1"'


def test_livemigrate_refusal_says_why() -> None:
    """A LiveMigrate VMI that cannot migrate: refused, naming the VMI and the handler's
    reason, and what the user can do."""
    verdict = eviction_verdict(vmi(S.LIVE_MIGRATE, migratable=False), pod_node=NODE, default=S.NONE)
    assert "ns/vm1" in verdict.message and "hostDisk" in verdict.message
    assert "evictionStrategy" in verdict.message
    unknown = eviction_verdict(vmi(S.LIVE_MIGRATE, migratable=None), pod_node=NODE, default=S.NONE)
    assert unknown.action is A.REFUSE and "not known yet" in unknown.message


def test_marked_or_target_pods_are_refused_without_a_new_mark() -> None:
    """A VMI already being evacuated, or an eviction of the target pod of its migration in
    progress: refused, nothing marked again. A pod on a node the VMI has left (an old
    source, a failed migration's target) may go."""
    marked = eviction_verdict(vmi(S.LIVE_MIGRATE, marked=NODE), pod_node=NODE, default=S.NONE)
    assert marked.action is A.REFUSE and marked.message.startswith("Evacuation in progress")
    v = vmi(S.LIVE_MIGRATE)
    migrating = dataclasses.replace(
        v, status=dataclasses.replace(v.status, migration_state=MigrationState(migration_uid="m"))
    )
    target = eviction_verdict(migrating, pod_node="node02", default=S.NONE, pod_migration_uid="m")
    assert target.action is A.REFUSE and "migration in progress" in target.message
    done = dataclasses.replace(
        migrating,
        status=dataclasses.replace(
            v.status, migration_state=MigrationState(migration_uid="m", completed=True)
        ),
    )
    for candidate in (v, done):
        left = eviction_verdict(candidate, pod_node="node02", default=S.NONE)
        assert left.action is A.ALLOW


@pytest.mark.parametrize("phase", [VMIPhase.SUCCEEDED, VMIPhase.FAILED])
def test_final_vmis_are_not_protected(phase: VMIPhase) -> None:
    """A VMI that has ended: its pod may go and it needs no budget."""
    v = vmi(S.LIVE_MIGRATE, phase=phase)
    assert eviction_verdict(v, pod_node=NODE, default=S.NONE).action is A.ALLOW
    assert budget_min_available(v, live_pods=1, default=S.NONE) is None


def test_budget_widens_while_two_pods_live() -> None:
    """minAvailable is 2 while the source and a migration target pod both live, else 1."""
    v = vmi(S.LIVE_MIGRATE)
    assert budget_min_available(v, live_pods=2, default=S.NONE) == 2
    assert budget_min_available(v, live_pods=1, default=S.NONE) == 1
    assert budget_min_available(v, live_pods=0, default=S.NONE) == 1


@pytest.mark.parametrize(
    ("strategy", "migratable", "migrates"),
    [
        pytest.param(S.LIVE_MIGRATE, True, True, id="livemigrate"),
        pytest.param(S.LIVE_MIGRATE_IF_POSSIBLE, True, True, id="ifpossible"),
        pytest.param(S.EXTERNAL, True, False, id="external-only-marked"),
        pytest.param(S.LIVE_MIGRATE, False, False, id="not-migratable"),
    ],
)
def test_which_marked_vmis_kubevirt_py_migrates(
    strategy: EvictionStrategy, migratable: bool, migrates: bool
) -> None:
    """LiveMigrate and LiveMigrateIfPossible VMIs are migrated; External ones only marked."""
    assert migrates_on_eviction(vmi(strategy, migratable=migratable), S.NONE) is migrates
