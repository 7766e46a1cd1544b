"""VMI replica set decisions, pure: which VMIs a set owns, adopts and releases; how many to
create or which to delete; the status it shows. (KubeVirt's replicaset controller, with
Kubernetes' ReplicaSet claiming and deletion order.)

    claim    a VMI controlled by the set stays its member while the selector matches it and
             is released (its ownerReference removed) when it stops matching; an orphan
             (no controller) that matches is adopted; a VMI another controller owns is
             never touched;
    members  active = not final, not deleting, not Ready=False/PodTerminating;
             finished = final (Succeeded/Failed) or terminating-unknown, and not deleting:
             these are deleted so the set replaces them;
    scale    wanted - active VMIs are created (at most `burst` per sync) or the surplus is
             deleted, in Kubernetes' order: unscheduled before scheduled, Pending before
             Running, not ready before ready, newest first;
    backoff  a Failed member's replacement waits base·2^(n-1) s after n consecutive failures
             (capped); the count resets once every wanted member is ready.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.vm.logic import Backoff
from shared.model import (
    API_VERSION,
    ConditionReason,
    ConditionStatus,
    OwnerReference,
    ReplicaSetCondition,
    ReplicaSetConditionType,
    ReplicaSetStatus,
    VirtualMachineInstance,
    VirtualMachineInstanceReplicaSet,
    VMIConditionType,
    VMIPhase,
    format_time,
    parse_time,
)

# KubeVirt's default burstReplicas: creations or deletions per sync.
BURST_REPLICAS = 250

ReplicaSet = VirtualMachineInstanceReplicaSet
VMI = VirtualMachineInstance

PAUSED_EVENT = "SuccessfulPaused"
RESUMED_EVENT = "SuccessfulResumed"


class InvalidSpec(ValueError):
    """The set cannot be synced as it is (admission refuses this; an old object may not)."""


def owner_reference(rs: ReplicaSet) -> OwnerReference:
    """The controller reference a member carries."""
    return rs.controller_reference()


def check_spec(rs: ReplicaSet) -> None:
    """Raise InvalidSpec unless the set has a selector, a labelled template it selects."""
    spec = rs.spec
    if spec.selector is None:
        raise InvalidSpec("spec.selector is missing")
    if spec.template is None or not spec.template.metadata.labels:
        raise InvalidSpec("spec.template.metadata.labels is missing")
    if not spec.selector.matches(spec.template.metadata.labels):
        raise InvalidSpec("spec.selector does not match spec.template.metadata.labels")


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """The set's view of the VMIs of its namespace."""

    owned: tuple[VMI, ...]
    adopt: tuple[VMI, ...]
    release: tuple[VMI, ...]


def claim(rs: ReplicaSet, vmis: Iterable[VMI]) -> Claim:
    """Members (owned and still selected), orphans to adopt, members to release."""
    selector = rs.spec.selector
    owned: list[VMI] = []
    adopt: list[VMI] = []
    release: list[VMI] = []
    for vmi in vmis:
        selected = selector is not None and selector.matches(vmi.metadata.labels)
        ref = vmi.metadata.controller_ref()
        if ref is not None and ref.uid == rs.uid:
            (owned if selected or vmi.metadata.is_deleting else release).append(vmi)
        elif ref is None and selected and _adoptable(rs, vmi):
            adopt.append(vmi)
    return Claim(owned=tuple(owned), adopt=tuple(adopt), release=tuple(release))


def _adoptable(rs: ReplicaSet, vmi: VMI) -> bool:
    return not (vmi.metadata.is_deleting or vmi.is_final() or rs.metadata.is_deleting)


def _terminating(vmi: VMI) -> bool:
    cond = vmi.status.condition(VMIConditionType.READY)
    return (
        cond is not None
        and cond.status == ConditionStatus.FALSE
        and cond.reason == ConditionReason.POD_TERMINATING
    )


def is_active(vmi: VMI) -> bool:
    """Counts as a replica: not final, not deleting, its pod not terminating."""
    return not vmi.is_final() and not vmi.metadata.is_deleting and not _terminating(vmi)


def is_finished(vmi: VMI) -> bool:
    """To be deleted and replaced: final, or its pod terminating, and not yet deleting."""
    return not vmi.metadata.is_deleting and (vmi.is_final() or _terminating(vmi))


def is_ready(vmi: VMI) -> bool:
    """The VMI's Ready condition is True."""
    return vmi.status.condition_is_true(VMIConditionType.READY)


_PHASE_RANK = {VMIPhase.UNSET: 0, VMIPhase.PENDING: 0, VMIPhase.SCHEDULING: 1}


def deletion_order(vmis: Iterable[VMI]) -> list[VMI]:
    """Kubernetes' ReplicaSet order of deletion: the cheapest to lose first."""

    def rank(vmi: VMI) -> tuple[int, int, int, float]:
        scheduled = 1 if vmi.status.node_name else 0
        phase = _PHASE_RANK.get(vmi.status.phase_or_unset, 2)
        ready = 1 if is_ready(vmi) else 0
        created = vmi.metadata.creation_timestamp
        age = -parse_time(created).timestamp() if created else float("-inf")
        return (scheduled, phase, ready, age)

    return sorted(vmis, key=rank)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalePlan:
    """What one sync creates or deletes."""

    create: int = 0
    delete: tuple[VMI, ...] = ()
    # Finished members to delete (so they are replaced).
    clean: tuple[VMI, ...] = ()
    # Seconds until a held-back replacement may be created.
    hold: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Failures:
    """Consecutive Failed members of one set and when the last one was seen."""

    count: int = 0
    last: datetime | None = None

    def after(self, failed: int, now: datetime) -> Failures:
        """This record with `failed` more failures seen at `now`."""
        return self if failed == 0 else Failures(count=self.count + failed, last=now)

    def hold(self, *, now: datetime, backoff: Backoff) -> float | None:
        """Seconds a replacement must still wait (None: create now)."""
        if self.count == 0 or self.last is None:
            return None
        left = backoff.delay(self.count) - (now - self.last).total_seconds()
        return left if left > 0 else None


def plan_scale(
    rs: ReplicaSet,
    owned: Sequence[VMI],
    *,
    hold: float | None = None,
    burst: int = BURST_REPLICAS,
) -> ScalePlan:
    """Create or delete toward spec.replicas; finished members are cleaned up. A paused or
    deleting set does neither; `hold` (failure backoff) delays creations only."""
    if rs.spec.paused or rs.metadata.is_deleting:
        return ScalePlan()
    active = [v for v in owned if is_active(v)]
    clean = tuple(v for v in owned if is_finished(v))[:burst]
    diff = rs.spec.wanted - len(active)
    if diff < 0:
        return ScalePlan(delete=tuple(deletion_order(active)[: min(-diff, burst)]), clean=clean)
    if diff > 0 and hold is not None:
        return ScalePlan(clean=clean, hold=hold)
    return ScalePlan(create=min(diff, burst), clean=clean)


def failed_members(vmis: Iterable[VMI]) -> int:
    """Members that failed (phase Failed): each counts toward the replacement backoff."""
    return sum(1 for v in vmis if v.status.phase_or_unset is VMIPhase.FAILED)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScaleError:
    """Why the last scale did not complete (ReplicaFailure)."""

    reason: str  # FailedCreate or FailedDelete
    message: str


def scale_conditions(
    old: ReplicaSetStatus, *, paused: bool, error: ScaleError | None, now: datetime
) -> tuple[ReplicaSetCondition, ...]:
    """old's conditions with ReplicaPaused and ReplicaFailure as `paused` and `error` say
    (an unchanged condition is kept as it is, its transition time too)."""
    owned = (ReplicaSetConditionType.REPLICA_PAUSED, ReplicaSetConditionType.REPLICA_FAILURE)
    conditions = [c for c in old.conditions if c.type not in owned]
    stamp = format_time(now)
    was_paused = old.condition(ReplicaSetConditionType.REPLICA_PAUSED)
    if paused:
        conditions.append(
            was_paused
            or ReplicaSetCondition(
                type=ReplicaSetConditionType.REPLICA_PAUSED,
                status=ConditionStatus.TRUE,
                reason="Paused",
                message="Controller got paused",
                last_transition_time=stamp,
            )
        )
    failure = old.condition(ReplicaSetConditionType.REPLICA_FAILURE)
    if error is not None:
        if failure is None or failure.reason != error.reason:
            failure = ReplicaSetCondition(
                type=ReplicaSetConditionType.REPLICA_FAILURE,
                status=ConditionStatus.TRUE,
                reason=error.reason,
                message=error.message,
                last_transition_time=stamp,
            )
        conditions.append(failure)
    return tuple(conditions)


def next_status(
    rs: ReplicaSet, owned: Sequence[VMI], *, error: ScaleError | None, now: datetime
) -> ReplicaSetStatus:
    """status: replicas (active members), readyReplicas, the selector string, and the
    ReplicaPaused / ReplicaFailure conditions."""
    active = [v for v in owned if is_active(v)]
    selector = rs.spec.selector
    return ReplicaSetStatus(
        replicas=len(active),
        ready_replicas=sum(1 for v in active if is_ready(v)),
        label_selector=selector.render() if selector is not None else rs.status.label_selector,
        conditions=scale_conditions(rs.status, paused=bool(rs.spec.paused), error=error, now=now),
    )


def vmi_body(rs: ReplicaSet) -> dict[str, Any]:
    """A member VMI: the template's metadata (name generated from the template's name or
    generateName, else the set's), its spec, owned by the set."""
    template = rs.spec.template
    if template is None:
        raise InvalidSpec("spec.template is missing")
    meta = template.metadata
    base = meta.name or meta.generate_name or rs.name
    return {
        "apiVersion": API_VERSION,
        "kind": VMI.KIND,
        "metadata": {
            "generateName": base,
            "namespace": rs.namespace,
            "labels": dict(meta.labels),
            "annotations": dict(meta.annotations),
            "ownerReferences": [owner_reference(rs).to_dict()],
        },
        "spec": template.spec.to_dict(),
    }
