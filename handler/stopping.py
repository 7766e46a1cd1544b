"""Graceful stop of one guest: ACPI power-off re-sent every few seconds, kill at grace end.

A booting guest misses the ACPI button (the seeds saw it), so the request is repeated
until the domain is off; when the grace period ends the domain is destroyed. The grace
period runs from the VMI's deletionTimestamp when it is being deleted (so it survives a
handler restart), else from when the handler first saw the stop request (the launcher's
pod is terminating).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from shared.model import VirtualMachineInstance, parse_time


@dataclass(slots=True)
class StopState:
    """Progress of one guest's stop (handler memory; rebuilt after a restart)."""

    asked_at: float  # monotonic
    last_acpi: float | None = None
    kills: int = 0


class StopStep(StrEnum):
    """What to do now: send ACPI, kill, or wait; and when to look again."""

    ACPI = "acpi"
    KILL = "kill"
    WAIT = "wait"


@dataclass(frozen=True, slots=True, kw_only=True)
class StopPlan:
    step: StopStep
    revisit_in: float  # seconds until the next step is due
    remaining: float  # seconds of grace left


def deadline(vmi: VirtualMachineInstance, state: StopState, *, now: float, wall: datetime) -> float:
    """The monotonic time the grace period ends."""
    grace = float(vmi.spec.grace_period_seconds)
    stamp = vmi.metadata.deletion_timestamp
    if stamp is None:
        return state.asked_at + grace
    end = parse_time(stamp) + timedelta(seconds=grace)
    return now + (end - wall).total_seconds()


def plan(state: StopState, *, now: float, ends_at: float, acpi_interval: float) -> StopPlan:
    """The next step of a stop in progress (the domain is known to be still on)."""
    remaining = ends_at - now
    if remaining <= 0:
        return StopPlan(step=StopStep.KILL, revisit_in=acpi_interval, remaining=remaining)
    due = state.last_acpi is None or now - state.last_acpi >= acpi_interval
    next_acpi = acpi_interval if due else acpi_interval - (now - (state.last_acpi or now))
    return StopPlan(
        step=StopStep.ACPI if due else StopStep.WAIT,
        revisit_in=max(0.05, min(next_acpi, remaining)),
        remaining=remaining,
    )
