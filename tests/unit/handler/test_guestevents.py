"""An expired guest watchdog becomes one Warning Event per expiry the launcher counted,
and the count crosses the wire with the domain's status."""

from __future__ import annotations

from handler.domains import DomainRecord
from handler.guestevents import WATCHDOG_REASON, watchdog_event
from handler.reconcile_deps import Local
from shared.kube import EventType
from shared.wire.domain import DomainState, DomainStatus


def _record(fired: int, action: str = "reset") -> DomainRecord:
    status = DomainStatus(
        name="ns_v", namespace="ns", vmi_name="v", vmi_uid="u", state=DomainState.RUNNING,
        watchdog_fired=fired, watchdog_action=action,
    )  # fmt: skip
    return DomainRecord(status=status, source="Watchdog")


def test_each_new_expiry_is_reported_once() -> None:
    """Nothing before an expiry; one Event per new count, naming the action; none again."""
    local = Local(uid="u")
    assert watchdog_event(None, local) is None
    assert watchdog_event(_record(0), local) is None
    event = watchdog_event(_record(1), local)
    assert event is not None
    assert event[:2] == (EventType.WARNING, WATCHDOG_REASON) and "action reset" in event[2]
    assert watchdog_event(_record(1), local) is None
    assert watchdog_event(_record(2, "poweroff"), local) is not None


def test_watchdog_count_crosses_the_wire() -> None:
    """DomainStatus keeps the watchdog count and action through to_wire/from_wire; an old
    launcher's status without them reads as none."""
    status = _record(3, "poweroff").status
    assert DomainStatus.from_wire(status.to_wire()) == status
    wire = status.to_wire()
    del wire["watchdogFired"], wire["watchdogAction"]
    assert DomainStatus.from_wire(wire).watchdog_fired == 0
