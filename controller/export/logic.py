"""What an export should look like now (pure, no I/O): phase, conditions, links, and whether
the exporter pod should exist.

    plan_export(vme, world, now) → ExportPlan(status, want_pod, requeue_after)

    expired (creationTimestamp + ttlDuration, KubeVirt's 2h default)  → Terminated, no pod
    the source cannot be exported now (claim missing, unbound, in use;
      VM missing or running; the token Secret not there yet)          → Pending, no pod
    exporter pod not ready                                            → Pending (PodPending)
    exporter pod ready                                                → Ready, links.internal
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime

from shared.model import format_time, parse_time
from shared.model.export import (
    DEFAULT_TTL,
    ExportCondition,
    ExportConditionType,
    ExportFormat,
    ExportLink,
    ExportLinks,
    ExportPhase,
    ExportStatus,
    ExportVolume,
    ExportVolumeFormat,
    VirtualMachineExport,
    parse_duration,
    volume_path,
)

# KubeVirt's reasons.
PVC_NOT_FOUND = "PVCNotFound"
PVC_PENDING = "PVCPending"
PVC_BOUND = "PVCBound"
IN_USE = "InUse"
VM_NOT_FOUND = "VMNotFound"
NO_VOLUMES = "VMNoVolumes"
POD_PENDING = "PodPending"
POD_READY = "PodReady"
TOKEN_MISSING = "TokenSecretMissing"
TTL_EXPIRED = "TTLExpired"
INVALID = "InvalidSource"
POLL_SECONDS = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Blocked:
    """Why the source cannot be exported now (a Ready=False reason and message)."""

    reason: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class World:
    """What the controller read: the claims to export or why not, the pod, the names."""

    claims: tuple[str, ...] = ()
    # Claims holding files rather than a disk (a memory dump's): served as a tar.gz.
    archives: frozenset[str] = frozenset()
    blocked: Blocked | None = None
    vm_name: str | None = None
    token_secret: str
    service_name: str
    host: str  # <service>.<namespace>.svc
    ca_cert: str | None = None
    pod_ready: bool | None = None  # None: no exporter pod


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportPlan:
    status: ExportStatus
    want_pod: bool
    requeue_after: float | None


def expiry(vme: VirtualMachineExport) -> datetime | None:
    """creationTimestamp + ttlDuration (2h unset); None before the object has a timestamp."""
    created = vme.metadata.creation_timestamp
    if not created:
        return None
    ttl = vme.spec.ttl_duration
    return parse_time(created) + (parse_duration(ttl) if ttl else DEFAULT_TTL)


def links(world: World) -> ExportLinks:
    """links.internal: the CA and, per claim, its raw and gzip URLs (a memory dump's claim:
    its files as a tar.gz, KubeVirt's archive format for claims without a disk)."""
    volumes = tuple(
        ExportVolume(
            name=claim,
            formats=tuple(
                ExportVolumeFormat(format=f, url=f"https://{world.host}{volume_path(claim, f)}")
                for f in (
                    (ExportFormat.TAR_GZ,)
                    if claim in world.archives
                    else (ExportFormat.RAW, ExportFormat.GZIP)
                )
            ),
        )
        for claim in world.claims
    )
    return ExportLinks(internal=ExportLink(cert=world.ca_cert or "", volumes=volumes))


def plan_export(vme: VirtualMachineExport, world: World, *, now: datetime) -> ExportPlan:
    """The status to write, whether the pod should run, and when to look again."""
    ends = expiry(vme)
    plan = _Planner(vme=vme, world=world, ends=ends, now=now)
    if ends is not None and now >= ends:
        message = f"the export expired at {format_time(ends)} (spec.ttlDuration)"
        return plan.make(ExportPhase.TERMINATED, TTL_EXPIRED, message, requeue=None)
    left = (ends - now).total_seconds() if ends is not None else POLL_SECONDS
    poll = min(POLL_SECONDS, left)
    if world.blocked is not None:
        blocked = world.blocked
        return plan.make(ExportPhase.PENDING, blocked.reason, blocked.message, requeue=poll)
    if not world.pod_ready:
        return plan.make(ExportPhase.PENDING, POD_PENDING, "the exporter pod is starting", poll)
    return plan.make(ExportPhase.READY, POD_READY, "", requeue=max(left, 0.0))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Planner:
    vme: VirtualMachineExport
    world: World
    ends: datetime | None
    now: datetime

    def make(
        self, phase: ExportPhase, reason: str, message: str, requeue: float | None
    ) -> ExportPlan:
        ready = ExportCondition(
            type=ExportConditionType.READY,
            status="True" if phase is ExportPhase.READY else "False",
            reason=reason,
            message=message or None,
        )
        world = self.world
        status = dataclasses.replace(
            self.vme.status,
            phase=phase,
            links=links(world) if phase is ExportPhase.READY else None,
            token_secret_ref=world.token_secret,
            ttl_expiration_time=format_time(self.ends) if self.ends is not None else None,
            service_name=world.service_name,
            virtual_machine_name=world.vm_name,
            conditions=_merge(self.vme.status.conditions, ready, now_text=format_time(self.now)),
        )
        want_pod = phase is not ExportPhase.TERMINATED and world.blocked is None
        return ExportPlan(status=status, want_pod=want_pod, requeue_after=requeue)


def _merge(
    current: tuple[ExportCondition, ...], new: ExportCondition, *, now_text: str | None
) -> tuple[ExportCondition, ...]:
    """`new` in place of the condition of its type; the transition time kept when the
    status did not change."""
    old = next((c for c in current if c.type == new.type), None)
    since = old.last_transition_time if old is not None and old.status == new.status else now_text
    new = dataclasses.replace(new, last_transition_time=since)
    return (*(c for c in current if c.type != new.type), new)
