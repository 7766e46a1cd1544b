"""Migration decisions: limits, the phase path, handoff to the handlers, failure and cancel."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from controller.config import MigrationConfig
from controller.migration.logic import Capacity, MigrationInputs, MigrationPlan, plan_migration
from shared.launcherpod import LauncherPod
from shared.model import (
    MigrationAbortStatus,
    MigrationPhase,
    MigrationState,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMIPhase,
)
from tests.unit.controller.builders import (
    MIG_UID,
    NOW,
    ago,
    condition,
    make_migration,
    make_pod,
    make_vmi,
    unschedulable,
)

LIMITS = MigrationConfig(
    parallel_per_cluster=5, outbound_per_node=2, unschedulable_timeout=60, abort_timeout=120
)
SOURCE = make_pod(uid="src", name="virt-launcher-vm1-srcxx", node="node01", phase="Running")


def running_vmi(**kw: Any) -> VirtualMachineInstance:
    base: dict[str, Any] = {
        "phase": VMIPhase.RUNNING,
        "node": "node01",
        "conditions": (condition("LiveMigratable"),),
    }
    return make_vmi(**{**base, **kw})


def target(**kw: Any) -> LauncherPod:
    base: dict[str, Any] = {
        "uid": "tgt",
        "name": "virt-launcher-vm1-tgtxx",
        "migration_uid": MIG_UID,
    }
    return make_pod(**{**base, **kw})


def plan(
    m: VirtualMachineInstanceMigration,
    vmi: VirtualMachineInstance | None = None,
    pods: list[LauncherPod] | None = None,
    capacity: Capacity | None = None,
) -> MigrationPlan:
    return plan_migration(
        MigrationInputs(
            migration=m,
            vmi=vmi,
            pods=[SOURCE] if pods is None else pods,
            capacity=capacity or Capacity(),
            now=NOW,
            config=LIMITS,
        )
    )


def phases(p: MigrationPlan) -> list[str | None]:
    return [t.phase for t in p.status.phase_transition_timestamps]


def test_new_migration_is_admitted_and_creates_the_target_pod() -> None:
    """ "" → Pending → Scheduling in one step when the limits leave room."""
    p = plan(make_migration(), running_vmi())
    assert p.create_target_pod and p.finalizer is True
    assert phases(p) == ["Pending", "Scheduling"]


@pytest.mark.parametrize(
    "capacity",
    [
        pytest.param(Capacity(in_flight=5), id="cluster-limit"),
        pytest.param(Capacity(in_flight=2, outbound={"node01": 2}), id="node-limit"),
    ],
)
def test_limits_keep_a_migration_pending(capacity: Capacity) -> None:
    """5 in flight per cluster, 2 outbound per node: the next one waits in Pending."""
    p = plan(make_migration(), running_vmi(), capacity=capacity)
    assert not p.create_target_pod
    assert p.status.phase == MigrationPhase.PENDING and p.requeue_after is not None


def test_another_nodes_limit_does_not_block() -> None:
    """Outbound limits count per source node."""
    p = plan(
        make_migration(), running_vmi(), capacity=Capacity(in_flight=4, outbound={"node02": 2})
    )
    assert p.create_target_pod


def test_not_live_migratable_fails_with_the_handlers_reason() -> None:
    """LiveMigratable=False: Failed, the reason from the condition."""
    vmi = running_vmi(
        conditions=(condition("LiveMigratable", "False", message="disk is not shared"),)
    )
    p = plan(make_migration(), vmi)
    assert p.status.phase == MigrationPhase.FAILED
    assert p.status.migration_state is not None
    assert "disk is not shared" in (p.status.migration_state.failure_reason or "")


def test_vmi_not_running_yet_waits_and_missing_vmi_fails() -> None:
    """A VMI still starting keeps the migration Pending; no VMI at all fails it."""
    assert (
        plan(make_migration(), running_vmi(phase=VMIPhase.SCHEDULED)).status.phase
        == MigrationPhase.PENDING
    )
    assert plan(make_migration(), None).status.phase == MigrationPhase.FAILED


def test_one_migration_per_vmi_at_a_time() -> None:
    """A VMI mid-migration under another VMIM keeps this one Pending."""
    busy = running_vmi(
        migration_state=MigrationState(migration_uid="other", start_timestamp=ago(1))
    )
    assert not plan(make_migration(), busy).create_target_pod


def test_target_running_hands_off_with_migration_state() -> None:
    """Target pod Running: Scheduled → PreparingTarget, migrationState written to the VMI."""
    m = make_migration(phase="Scheduling")
    p = plan(m, running_vmi(), [SOURCE, target(node="node02", phase="Running")])
    assert p.status.phase == MigrationPhase.PREPARING_TARGET
    assert phases(p)[-2:] == ["Scheduled", "PreparingTarget"]
    assert p.vmi_state == MigrationState(
        migration_uid=MIG_UID,
        source_node="node01",
        target_node="node02",
        source_pod=SOURCE.name,
        target_pod="virt-launcher-vm1-tgtxx",
    )


def test_target_not_yet_running_stays_scheduling() -> None:
    """A bound but not running target pod changes nothing."""
    m = make_migration(phase="Scheduling")
    p = plan(m, running_vmi(), [SOURCE, target(node="node02")])
    assert p.status == m.status and p.vmi_state is None


def test_unschedulable_target_times_out_and_is_cleaned_up() -> None:
    """Unschedulable past the timeout: Failed, the target pod deleted."""
    m = make_migration(phase="Scheduling")
    young = target(conditions=unschedulable(ago(10)))
    p = plan(m, running_vmi(), [SOURCE, young])
    assert p.status.phase == MigrationPhase.SCHEDULING and p.requeue_after == pytest.approx(50)
    old = target(conditions=unschedulable(ago(61), "0/2 nodes: didn't match affinity"))
    p = plan(m, running_vmi(), [SOURCE, old])
    assert p.status.phase == MigrationPhase.FAILED and p.delete_pods == (old,)
    assert "didn't match affinity" in (p.status.migration_state.failure_reason or "")  # type: ignore[union-attr]


def test_target_pod_vanishing_fails_the_migration() -> None:
    """Scheduling with no target pod left: Failed."""
    p = plan(make_migration(phase="Scheduling"), running_vmi(), [SOURCE])
    assert p.status.phase == MigrationPhase.FAILED


def mine(**kw: Any) -> MigrationState:
    base: dict[str, Any] = {
        "migration_uid": MIG_UID,
        "source_node": "node01",
        "target_node": "node02",
        "target_pod": "virt-launcher-vm1-tgtxx",
    }
    return MigrationState(**{**base, **kw})


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        pytest.param(mine(), MigrationPhase.PREPARING_TARGET, id="preparing"),
        pytest.param(
            mine(target_node_address="10.0.0.2:5000"),
            MigrationPhase.TARGET_READY,
            id="target-ready",
        ),
        pytest.param(
            mine(target_node_address="a", start_timestamp=ago(1)),
            MigrationPhase.RUNNING,
            id="running",
        ),
        pytest.param(
            mine(start_timestamp=ago(2), completed=True, end_timestamp=ago(0)),
            MigrationPhase.SUCCEEDED,
            id="succeeded",
        ),
        pytest.param(
            mine(failed=True, failure_reason="no convergence"), MigrationPhase.FAILED, id="failed"
        ),
    ],
)
def test_phases_follow_the_vmis_migration_state(
    state: MigrationState, expected: MigrationPhase
) -> None:
    """After the handoff the VMIM's phase follows what the handlers write on the VMI."""
    m = make_migration(phase="PreparingTarget", state=mine())
    tgt = target(node="node02", phase="Running")
    p = plan(m, running_vmi(migration_state=state), [SOURCE, tgt])
    assert p.status.phase == expected
    assert p.status.migration_state is not None
    if expected == MigrationPhase.FAILED:
        assert p.delete_pods == (tgt,)
        assert p.status.migration_state.failure_reason == "no convergence"


def test_phases_never_move_backwards() -> None:
    """Running stays Running when the VMI still shows only the target address."""
    m = make_migration(phase="Running", state=mine())
    p = plan(
        m,
        running_vmi(migration_state=mine(target_node_address="a")),
        [SOURCE, target(node="node02", phase="Running")],
    )
    assert p.status.phase == MigrationPhase.RUNNING


def test_target_pod_lost_after_handoff_fails_and_asks_to_abort() -> None:
    """The target pod is gone mid-migration: Failed, abortRequested on the VMI."""
    m = make_migration(phase="Running", state=mine())
    p = plan(m, running_vmi(migration_state=mine(start_timestamp=ago(1))), [SOURCE])
    assert p.status.phase == MigrationPhase.FAILED
    assert p.vmi_state is not None and p.vmi_state.abort_requested is True


def test_a_failure_the_handlers_report_is_copied_whole_to_the_vmim() -> None:
    """The VMI's final migrationState (the launcher's own abort: abortStatus Succeeded,
    endTimestamp, its reason) becomes the Failed VMIM's, not the VMIM's older copy."""
    reason = "Live migration stuck for 8 seconds and has been aborted"
    final = mine(
        start_timestamp=ago(9),
        end_timestamp=ago(0),
        failed=True,
        failure_reason=reason,
        abort_status=MigrationAbortStatus.SUCCEEDED,
    )
    m = make_migration(phase="Running", state=mine(start_timestamp=ago(9)))
    p = plan(m, running_vmi(migration_state=final), [SOURCE, target(node="node02")])
    assert p.status.phase == MigrationPhase.FAILED
    assert p.status.migration_state == final


def test_cancel_before_handoff_deletes_the_target_and_lets_go() -> None:
    """Deleted while Scheduling: target pod deleted, Failed; finalizer kept until it is gone."""
    tgt = target(node="node02")
    m = make_migration(phase="Scheduling", deleting_since=1)
    p = plan(m, running_vmi(), [SOURCE, tgt])
    assert p.status.phase == MigrationPhase.FAILED and p.delete_pods == (tgt,)
    assert p.finalizer is True
    p = plan(m, running_vmi(), [SOURCE])
    assert p.finalizer is False


def test_cancel_after_handoff_requests_an_abort_and_waits() -> None:
    """Deleted while Running: abortRequested on the VMI; the finalizer waits for the handlers."""
    m = make_migration(phase="Running", state=mine(), deleting_since=5)
    vmi = running_vmi(migration_state=mine(start_timestamp=ago(3)))
    p = plan(m, vmi, [SOURCE, target(node="node02", phase="Running")])
    assert p.vmi_state is not None and p.vmi_state.abort_requested
    assert p.finalizer is True and p.status.phase == MigrationPhase.RUNNING
    aborted = running_vmi(
        migration_state=mine(start_timestamp=ago(3), failed=True, abort_requested=True)
    )
    tgt = target(node="node02", phase="Running")
    p = plan(m, aborted, [SOURCE, tgt])
    assert p.status.phase == MigrationPhase.FAILED and p.delete_pods == (tgt,)


def test_cancel_gives_up_after_the_abort_timeout() -> None:
    """Handlers that never confirm the abort do not hold the VMIM forever."""
    m = make_migration(phase="Running", state=mine(), deleting_since=LIMITS.abort_timeout + 1)
    vmi = running_vmi(migration_state=mine(start_timestamp=ago(3)))
    tgt = target(node="node02", phase="Running")
    p = plan(m, vmi, [SOURCE, tgt])
    assert p.status.phase == MigrationPhase.FAILED and p.delete_pods == (tgt,)


def test_final_failed_migration_cleans_its_target_then_drops_the_finalizer() -> None:
    """A Failed VMIM whose target pod still runs deletes it; then the finalizer goes."""
    m = make_migration(phase="Failed")
    tgt = target(node="node02", phase="Running")
    p = plan(m, running_vmi(), [SOURCE, tgt])
    assert p.delete_pods == (tgt,) and p.finalizer is True
    assert plan(m, running_vmi(), [SOURCE]).finalizer is False


def test_succeeded_migration_never_deletes_the_vmis_new_pod() -> None:
    """After success the target pod is the VMI's pod: untouched."""
    m = make_migration(phase="Succeeded")
    tgt = target(node="node02", phase="Running")
    p = plan(m, running_vmi(node="node02"), [tgt])
    assert p.delete_pods == () and p.finalizer is False
    assert dataclasses.replace(p.status) == m.status
