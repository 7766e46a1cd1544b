"""Kubernetes Events for what the guest's devices report through libvirt beside its state:
an expired watchdog (its action, reset / poweroff / shutdown, then shows in the domain's
state and the VMI's phase, as in KubeVirt; the Event says why)."""

from __future__ import annotations

from handler.domains import DomainRecord
from handler.reconcile_deps import Local
from shared.kube import EventType

WATCHDOG_REASON = "WatchdogExpired"


def watchdog_event(record: DomainRecord | None, local: Local) -> tuple[EventType, str, str] | None:
    """(type, reason, message) once per new expiry the launcher counted, else None."""
    if record is None or record.status.watchdog_fired <= local.watchdog_reported:
        return None
    fired = record.status.watchdog_fired
    local.watchdog_reported = fired
    action = record.status.watchdog_action or "unknown"
    message = f"the guest's watchdog expired (action {action}; {fired} time(s) in this launcher)"
    return (EventType.WARNING, WATCHDOG_REASON, message)
