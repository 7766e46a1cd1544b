"""VMI status transitions → KubeVirt's events: Created + Started on Running, Stopped on
Succeeded, Stopped + the failure's reason (e.g. LauncherDied) as warnings on Failed,
Paused / Resumed, Migrating / Migrated / MigrationFailed once per migration."""

from __future__ import annotations

from typing import Any

import pytest

from shared.kube.vmi_events import vmi_transition_events
from shared.model import (
    ConditionStatus,
    MigrationState,
    VMICondition,
    VMIConditionType,
    VMIPhase,
    VMIStatus,
)

RUNNING = VMIStatus(phase=VMIPhase.RUNNING)
PAUSED = RUNNING.with_condition(
    VMICondition(type=VMIConditionType.PAUSED, status=ConditionStatus.TRUE)
)
DIED = VMIStatus(phase=VMIPhase.FAILED, reason="LauncherDied").with_condition(
    VMICondition(
        type=VMIConditionType.SYNCHRONIZED,
        status=ConditionStatus.FALSE,
        message="launcher pod died",
    )
)


def migrating(**fields: Any) -> VMIStatus:
    return VMIStatus(
        phase=VMIPhase.RUNNING,
        migration_state=MigrationState(
            migration_uid="m1", start_timestamp="t", target_node="node02", **fields
        ),
    )


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            VMIStatus(phase=VMIPhase.SCHEDULED),
            RUNNING,
            [("Normal", "Created"), ("Normal", "Started")],
            id="started",
        ),
        pytest.param(RUNNING, RUNNING, [], id="no-change"),
        pytest.param(
            RUNNING, VMIStatus(phase=VMIPhase.SUCCEEDED), [("Normal", "Stopped")], id="shut-down"
        ),
        pytest.param(
            RUNNING, DIED, [("Warning", "Stopped"), ("Warning", "LauncherDied")], id="died"
        ),
        pytest.param(RUNNING, PAUSED, [("Normal", "Paused")], id="paused"),
        pytest.param(PAUSED, RUNNING, [("Normal", "Resumed")], id="resumed"),
        pytest.param(RUNNING, migrating(), [("Normal", "Migrating")], id="migrating"),
        pytest.param(migrating(), migrating(), [], id="still-migrating"),
        pytest.param(
            migrating(), migrating(completed=True), [("Normal", "Migrated")], id="migrated"
        ),
        pytest.param(
            RUNNING,
            migrating(completed=True),
            [("Normal", "Migrating"), ("Normal", "Migrated")],
            id="whole-migration-in-one-write",
        ),
        pytest.param(
            migrating(),
            migrating(failed=True, failure_reason="target died"),
            [("Warning", "MigrationFailed")],
            id="migration-failed",
        ),
    ],
)
def test_transition_events(old: VMIStatus, new: VMIStatus, expected: list[tuple[str, str]]) -> None:
    """Each transition yields KubeVirt's (type, reason), once."""
    assert [(str(t), r) for t, r, _ in vmi_transition_events(old, new)] == expected


def test_failure_message_comes_from_the_condition() -> None:
    """The failure reason's event says what the Synchronized condition says."""
    events = vmi_transition_events(RUNNING, DIED)
    assert events[-1][2] == "launcher pod died"


def test_migrated_names_the_target_node() -> None:
    """Migrated says where the VMI went; MigrationFailed says why it failed."""
    (done,) = vmi_transition_events(migrating(), migrating(completed=True))
    assert done[2] == "The VirtualMachineInstance migrated to node node02."
    (failed,) = vmi_transition_events(migrating(), migrating(failed=True, failure_reason="x"))
    assert "failed. reason: x" in failed[2]


def _synced(status: ConditionStatus, message: str | None = None) -> VMIStatus:
    return RUNNING.with_condition(
        VMICondition(
            type=VMIConditionType.ACCESS_CREDENTIALS_SYNCHRONIZED, status=status, message=message
        )
    )


def test_access_credential_events_follow_the_condition() -> None:
    """AccessCredentialsSynchronized set True: a Normal AccessCredentialsSyncSuccess; turned
    False: a Warning AccessCredentialsSyncFailed with its message (KubeVirt's wording);
    unchanged: nothing."""
    ok = _synced(ConditionStatus.TRUE)
    failed = _synced(ConditionStatus.FALSE, "Guest agent is offline")
    assert [(str(t), r, m) for t, r, m in vmi_transition_events(RUNNING, ok)] == [
        ("Normal", "AccessCredentialsSyncSuccess", "Access credentials sync successful.")
    ]
    assert [(str(t), r, m) for t, r, m in vmi_transition_events(ok, failed)] == [
        ("Warning", "AccessCredentialsSyncFailed",
         "Access credentials sync failed: Guest agent is offline")
    ]  # fmt: skip
    assert vmi_transition_events(ok, ok) == []
