"""The source handler's migration steps, decided from migrationState + the launcher's report."""

from __future__ import annotations

import dataclasses
from typing import Any

from handler.domains import DomainRecord
from handler.migration_proxy import migration_dir
from handler.migration_source import launcher_address, plan_source
from shared.model import MigrationAbortStatus, MigrationSideState, MigrationState
from shared.wire.domain import DomainState, DomainStatus
from shared.wire.launcher_api import Method
from shared.wire.migration import MigrationInfo, MigrationPhase, MigrationRole

NOW = "2026-11-22T00:00:00Z"
BASE = MigrationState(migration_uid="m1", source_node="a", target_node="b")
READY = MigrationState(
    migration_uid="m1", source_node="a", target_node="b", target_node_address="/mig/x"
)


def record(phase: MigrationPhase | None, **info: Any) -> DomainRecord:
    migration = (
        MigrationInfo(
            role=MigrationRole.SOURCE, phase=phase, target_address="/mig/x", **info
        ).to_wire()
        if phase
        else {}
    )
    status = DomainStatus(
        name="d", namespace="ns", vmi_name="v", vmi_uid="u", state=DomainState.RUNNING,
        migration=migration,
    )  # fmt: skip
    return DomainRecord(status=status, source="reply")


def test_waits_for_the_target_address() -> None:
    """No targetNodeAddress yet: nothing to do."""
    step = plan_source(BASE, record(None), now=NOW)
    assert (step.call, step.state) == (None, None)


def test_starts_once_the_target_is_ready() -> None:
    """Target ready, nothing reported yet: migrate, and write startTimestamp."""
    step = plan_source(READY, record(None), now=NOW)
    assert step.call is Method.MIGRATE and step.args == {"address": "/mig/x", "timeoutSeconds": 300}
    assert step.state is not None and step.state.start_timestamp == NOW


def test_does_not_start_twice() -> None:
    """startTimestamp written but the launcher's report not in yet: wait."""
    state = dataclasses.replace(READY, start_timestamp=NOW)
    assert plan_source(state, record(None), now=NOW).call is None


def test_success_is_written_as_completed() -> None:
    """The launcher reports Succeeded: completed=true with the end time."""
    step = plan_source(READY, record(MigrationPhase.SUCCEEDED, end_timestamp="t9"), now=NOW)
    assert step.state is not None and step.state.completed and step.state.end_timestamp == "t9"


def test_the_final_report_travels_with_the_step_for_the_record() -> None:
    """A finished migration's figures (downtime, elapsed) ride on the step to be logged."""
    final = record(MigrationPhase.SUCCEEDED, end_timestamp="t9", downtime_ms=42, elapsed_ms=900)
    step = plan_source(READY, final, now=NOW)
    assert step.outcome is not None
    assert (step.outcome.downtime_ms, step.outcome.elapsed_ms) == (42, 900)
    assert plan_source(READY, record(MigrationPhase.RUNNING), now=NOW).outcome is None


def test_failure_is_written_with_its_reason() -> None:
    """The launcher reports Failed: failed=true with libvirt's reason."""
    step = plan_source(READY, record(MigrationPhase.FAILED, failure_reason="boom"), now=NOW)
    assert step.state is not None and step.state.failed and step.state.failure_reason == "boom"


def test_abort_cancels_a_running_migration_then_records_it() -> None:
    """abortRequested while running → cancel_migration; once it failed → abortStatus."""
    aborting = dataclasses.replace(READY, abort_requested=True)
    assert plan_source(aborting, record(MigrationPhase.RUNNING), now=NOW).call is (
        Method.CANCEL_MIGRATION
    )
    done = plan_source(aborting, record(MigrationPhase.FAILED, aborted=True), now=NOW)
    assert done.state is not None and done.state.abort_status is MigrationAbortStatus.SUCCEEDED


def test_the_launchers_own_abort_is_failed_with_abort_status_and_its_reason() -> None:
    """A job the launcher aborted itself (progressTimeout, completion timeout) ends as
    KubeVirt's handler writes it: failed, abortStatus Succeeded, the launcher's reason
    unprefixed; a plain failure carries no abortStatus."""
    reason = "Live migration stuck for 3 seconds and has been aborted"
    failed = record(MigrationPhase.FAILED, failure_reason=reason, timed_out=True)
    step = plan_source(READY, failed, now=NOW)
    assert step.state is not None and step.state.failed
    assert step.state.abort_status is MigrationAbortStatus.SUCCEEDED
    assert step.state.failure_reason == reason
    plain = plan_source(READY, record(MigrationPhase.FAILED, failure_reason="boom"), now=NOW)
    assert plain.state is not None and plain.state.abort_status is None


def test_abort_before_start_needs_no_launcher() -> None:
    """abortRequested before migrate was sent: failed + aborted at once."""
    aborting = dataclasses.replace(BASE, abort_requested=True)
    step = plan_source(aborting, record(None), now=NOW)
    assert step.call is None and step.state is not None and step.state.failed


def test_a_decentralized_migration_streams_through_the_receiving_vmims_dir() -> None:
    """With proxy ports, the launcher migrates to the migration's dir in its pod, named
    by the receiving VMIM's UID (targetState.migrationUID) when there is one: libvirt
    hands the target the source's stream paths, and the target handler named its dir by
    its own VMIM; a usual migration's dir is named by its own UID."""
    usual = MigrationState(
        migration_uid="send-uid-1234",
        target_node_address="10.0.0.2",
        target_direct_migration_node_ports={"49152": 0},
    )
    assert launcher_address(usual) == str(migration_dir("send-uid-1234"))
    decentral = dataclasses.replace(
        usual, target_state=MigrationSideState(migration_uid="recv-uid-5678")
    )
    assert launcher_address(decentral) == str(migration_dir("recv-uid-5678"))
