"""Phase and condition bookkeeping shared by the VMI, VM and migration decisions.

Invariants:
- a phase change appends one entry to phaseTransitionTimestamps; setting the same phase
  again changes nothing (so a re-run sync produces an identical status and no write);
- a condition keeps its lastTransitionTime while its status stays the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import datetime
from typing import TypeVar

from shared.model import (
    ConditionStatus,
    MigrationStatus,
    PhaseTransition,
    VMCondition,
    VMICondition,
    VMIStatus,
    format_time,
)

_S = TypeVar("_S", VMIStatus, MigrationStatus)


def with_phases(status: _S, phases: Iterable[str], now: datetime) -> _S:
    """`status` moved forward through `phases`, each new one recorded at `now`.

    Phases only move forward in their enum's declaration order and never leave a final
    phase, so asking for a phase the object has already passed changes nothing.
    """
    enum_cls = type(status.phase_or_unset)
    order = list(enum_cls)
    current = status.phase_or_unset
    stamps = list(status.phase_transition_timestamps)
    stamp = format_time(now)
    for name in phases:
        phase = enum_cls(name)
        if current.is_final() or order.index(phase) <= order.index(current):
            continue
        stamps.append(PhaseTransition(phase=phase, phase_transition_timestamp=stamp))
        current = phase
    if current == status.phase_or_unset:
        return status
    return dataclasses.replace(status, phase=current, phase_transition_timestamps=tuple(stamps))


def vmi_condition(
    status: VMIStatus,
    type_: str,
    cond_status: ConditionStatus,
    *,
    reason: str,
    message: str,
    now: datetime,
) -> VMIStatus:
    """`status` with the condition set; unchanged status keeps its transition time."""
    old = status.condition(type_)
    new = VMICondition(
        type=type_,
        status=cond_status,
        reason=reason,
        message=message,
        last_probe_time=None,
        last_transition_time=_transition(old, cond_status, now),
    )
    if old is not None and _same(old, new):
        return status
    return status.with_condition(new)


def _transition(
    old: VMICondition | VMCondition | None, cond_status: ConditionStatus, now: datetime
) -> str:
    if old is not None and old.status == cond_status and old.last_transition_time:
        return old.last_transition_time
    return format_time(now)


def _same(a: VMICondition | VMCondition, b: VMICondition | VMCondition) -> bool:
    return (a.status, a.reason, a.message, a.last_transition_time) == (
        b.status,
        b.reason,
        b.message,
        b.last_transition_time,
    )


def vm_condition(
    old: VMCondition | None,
    type_: str,
    cond_status: ConditionStatus,
    *,
    reason: str,
    message: str,
    now: datetime,
) -> VMCondition:
    """A VM condition, keeping `old`'s transition time when its status is unchanged."""
    new = VMCondition(
        type=type_,
        status=cond_status,
        reason=reason or None,
        message=message or None,
        last_transition_time=_transition(old, cond_status, now),
    )
    if old is not None and _same(old, new) and old.extra == new.extra:
        return old
    return new
