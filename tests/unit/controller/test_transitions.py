"""Phase and condition bookkeeping: forward-only phases, stable transition times."""

from __future__ import annotations

from datetime import timedelta

from controller.transitions import vmi_condition, with_phases
from shared.model import ConditionStatus, MigrationPhase, MigrationStatus, VMIPhase, VMIStatus
from tests.unit.controller.builders import NOW


def test_phases_move_forward_and_record_each_step() -> None:
    """ "" → Pending → Scheduling records two timestamps."""
    status = with_phases(VMIStatus(), [VMIPhase.PENDING, VMIPhase.SCHEDULING], NOW)
    assert status.phase == VMIPhase.SCHEDULING
    assert [t.phase for t in status.phase_transition_timestamps] == ["Pending", "Scheduling"]


def test_phases_never_move_backwards_or_leave_final() -> None:
    """Asking for an earlier phase, or anything after Failed, changes nothing."""
    scheduled = VMIStatus(phase=VMIPhase.SCHEDULED)
    assert with_phases(scheduled, [VMIPhase.PENDING], NOW) is scheduled
    failed = VMIStatus(phase=VMIPhase.FAILED)
    assert with_phases(failed, [VMIPhase.RUNNING], NOW) is failed
    m = MigrationStatus(phase=MigrationPhase.RUNNING)
    assert with_phases(m, [MigrationPhase.SCHEDULED], NOW) is m


def transition_time(status: VMIStatus) -> str | None:
    cond = status.condition("Ready")
    assert cond is not None
    return cond.last_transition_time


def test_condition_keeps_its_transition_time_while_status_is_unchanged() -> None:
    """Same status, new message: lastTransitionTime stays; a status flip moves it."""
    false = ConditionStatus.FALSE
    first = vmi_condition(VMIStatus(), "Ready", false, reason="a", message="x", now=NOW)
    later = NOW + timedelta(seconds=30)
    second = vmi_condition(first, "Ready", false, reason="a", message="y", now=later)
    assert transition_time(second) == transition_time(first)
    true = ConditionStatus.TRUE
    flipped = vmi_condition(second, "Ready", true, reason="b", message="", now=later)
    assert transition_time(flipped) == "2025-01-02T03:04:35Z"
    assert vmi_condition(flipped, "Ready", true, reason="b", message="", now=NOW) is flipped
