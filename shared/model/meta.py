"""Object metadata, owner references, conditions and RFC 3339 time helpers.

Times stay RFC 3339 strings on the wire (what the API server stores); `format_time` and
`parse_time` convert at the edges, and callers pass the clock in (`now: Clock`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Self, TypeVar

from shared.model._codec import Model
from shared.model.enums import ConditionReason, ConditionStatus, VMConditionType, VMIConditionType

Clock = Callable[[], datetime]
_T = TypeVar("_T")


def utc_now() -> datetime:
    """The default clock: aware UTC now."""
    return datetime.now(UTC)


def format_time(t: datetime) -> str:
    """RFC 3339 at second precision in UTC ("2024-05-01T12:00:00Z"), as metav1.Time renders."""
    if t.tzinfo is None:
        raise ValueError("naive datetime; pass an aware datetime (UTC)")
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(s: str) -> datetime:
    """Parse an RFC 3339 timestamp ("...Z" or with an offset) to an aware datetime."""
    parsed = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without a zone: {s!r}")
    return parsed


def now_rfc3339(clock: Clock = utc_now) -> str:
    """The clock's now as an RFC 3339 string."""
    return format_time(clock())


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnerReference(Model):
    """metav1.OwnerReference."""

    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    controller: bool | None = None
    block_owner_deletion: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectMeta(Model):
    """metav1.ObjectMeta (the fields the daemons read or write)."""

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owner_references: tuple[OwnerReference, ...] = ()
    finalizers: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The cache key "namespace/name" ("name" for cluster-scoped objects)."""
        name = self.name or ""
        return f"{self.namespace}/{name}" if self.namespace else name

    @property
    def is_deleting(self) -> bool:
        """True once the API server has set deletionTimestamp."""
        return self.deletion_timestamp is not None

    def controller_ref(self) -> OwnerReference | None:
        """The owner reference with controller=true, if any."""
        return next((r for r in self.owner_references if r.controller), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Condition(Model):
    """What VMI and VM conditions share; each narrows `type` to its own enum."""

    type: str | None = None
    status: ConditionStatus | None = None
    reason: ConditionReason | str | None = None
    message: str | None = None
    last_probe_time: str | None = None
    last_transition_time: str | None = None

    @property
    def is_true(self) -> bool:
        """status == "True"."""
        return self.status == ConditionStatus.TRUE


@dataclass(frozen=True, slots=True, kw_only=True)
class VMICondition(_Condition):
    """A VMI condition; unknown types and reasons load as plain strings."""

    type: VMIConditionType | str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VMCondition(_Condition):
    """A VM condition; unknown types and reasons load as plain strings."""

    type: VMConditionType | str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseTransition(Model):
    """One entry of status.phaseTransitionTimestamps (the phase stays a plain str)."""

    phase: str | None = None
    phase_transition_timestamp: str | None = None


_C = TypeVar("_C", VMICondition, VMCondition)


class ConditionsMixin(Generic[_C]):
    """Condition lookup and replacement for status classes with a `conditions` tuple."""

    __slots__ = ()
    conditions: tuple[_C, ...]

    def condition(self, type_: str) -> _C | None:
        """The condition of this type, if present."""
        return next((c for c in self.conditions if c.type == type_), None)

    def condition_is_true(self, type_: str) -> bool:
        """True iff a condition of this type exists with status "True"."""
        cond = self.condition(type_)
        return cond is not None and cond.is_true

    def with_condition(self, cond: _C) -> Self:
        """A copy with `cond` replacing any condition of the same type (order kept)."""
        if self.condition(str(cond.type)) is None:
            new = (*self.conditions, cond)
        else:
            new = tuple(cond if c.type == cond.type else c for c in self.conditions)
        return _replace(self, conditions=new)

    def without_condition(self, type_: str) -> Self:
        """A copy without conditions of this type."""
        return _replace(self, conditions=tuple(c for c in self.conditions if c.type != type_))


def _replace(obj: _T, **changes: Any) -> _T:
    """dataclasses.replace for the mixins (their subclasses are always dataclasses)."""
    return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
