"""The graceful-stop plan (handler.stopping): ACPI cadence and the grace deadline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from handler.stopping import StopState, StopStep, deadline, plan
from shared.model import VirtualMachineInstance, format_time
from tests.unit.handler.fakes import vmi_dict

WALL = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("last_acpi", "now", "step", "revisit"),
    [
        pytest.param(None, 100.0, StopStep.ACPI, 3.0, id="first-request"),
        pytest.param(100.0, 101.0, StopStep.WAIT, 2.0, id="not-due"),
        pytest.param(100.0, 103.0, StopStep.ACPI, 3.0, id="due-again"),
        pytest.param(100.0, 129.0, StopStep.ACPI, 1.0, id="acpi-then-revisit-at-grace-end"),
        pytest.param(128.0, 129.0, StopStep.WAIT, 1.0, id="wait-until-grace-end"),
        pytest.param(100.0, 130.0, StopStep.KILL, 3.0, id="grace-over"),
    ],
)
def test_plan(last_acpi: float | None, now: float, step: StopStep, revisit: float) -> None:
    """ACPI at most every interval, never revisited later than the grace end; then Kill."""
    state = StopState(asked_at=100.0, last_acpi=last_acpi)
    got = plan(state, now=now, ends_at=130.0, acpi_interval=3.0)
    assert got.step is step
    assert got.revisit_in == pytest.approx(revisit)


def test_deadline_runs_from_deletion_timestamp() -> None:
    """A deleted VMI's grace starts at deletionTimestamp, whenever the handler saw it."""
    raw = vmi_dict(terminationGracePeriodSeconds=20)
    raw["metadata"]["deletionTimestamp"] = format_time(WALL)
    vmi = VirtualMachineInstance.from_dict(raw)
    state = StopState(asked_at=500.0)
    assert deadline(vmi, state, now=500.0, wall=WALL + timedelta(seconds=5)) == pytest.approx(515.0)


def test_deadline_of_a_pod_termination_runs_from_first_sight() -> None:
    """Without deletion, the grace runs from when the stop was first seen."""
    vmi = VirtualMachineInstance.from_dict(vmi_dict(terminationGracePeriodSeconds=20))
    assert deadline(vmi, StopState(asked_at=500.0), now=510.0, wall=WALL) == 520.0
