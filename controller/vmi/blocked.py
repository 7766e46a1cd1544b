"""Launcher pods that never ran: which were replaced, and when a blocked one is.

A kubelet that cannot create a launcher pod's container for a device resource (its
device plugin dropped, "devices.kubevirt.io/tun: no device plugin is registered") keeps
the pod Pending and retries; the handler's plugins register again within seconds, so the
pod gets `START_GRACE` to start. After that it is deleted and another launcher pod
(the next attempt, annotated with its number) takes its place, as for pods the kubelet
refused at admission; the fifth launcher pod that could not start fails the VMI with the
reason. A pod deleted for a later attempt is superseded: it no longer counts as the VMI's
launcher while it terminates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from shared.launcherpod import LauncherPod, PodPhase
from shared.model import parse_time

START_GRACE = 20.0


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockedStart:
    """What to do about a launcher pod blocked on a device: wait, or replace it."""

    message: str
    wait: float | None  # seconds still granted; None: replace (or fail) now
    attempts: int  # launcher pods of the VMI that could not start, this one included


def next_attempt(rejected: Sequence[LauncherPod]) -> int:
    """The attempt number of the launcher pod that follows `rejected` ones."""
    return max(len(rejected), max((p.attempt + 1 for p in rejected), default=0))


def superseded(pod: LauncherPod, launchers: Sequence[LauncherPod]) -> bool:
    """Deleted while a later attempt exists: replaced, not the VMI's launcher any more."""
    return pod.deleting and any(p.attempt > pod.attempt for p in launchers)


def blocked_start(
    pod: LauncherPod, rejected: Sequence[LauncherPod], *, now: datetime
) -> BlockedStart | None:
    """None unless `pod` is Pending with a container the kubelet cannot create for a device."""
    if pod.start_blocked is None or pod.deleting or pod.phase != PodPhase.PENDING:
        return None
    created = parse_time(pod.created) if pod.created else None
    waited = (now - created).total_seconds() if created is not None else 0.0
    message = f"launcher pod {pod.name} cannot start: {pod.start_blocked}"
    attempts = max(next_attempt(rejected), pod.attempt) + 1
    wait = START_GRACE - waited if waited < START_GRACE else None
    return BlockedStart(message=message, wait=wait, attempts=attempts)
