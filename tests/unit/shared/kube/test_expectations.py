"""Controller expectations: counted creations, UID-tracked deletions, TTL expiry."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from shared.kube.expectations import Expectations, Pending
from tests.unit.shared.kube.fakes import FakeClock


def make() -> tuple[Expectations, FakeClock]:
    clock = FakeClock()
    return Expectations(ttl=300.0, clock=clock), clock


def test_unknown_key_is_satisfied() -> None:
    """A key nobody set expectations for may sync."""
    exp, _ = make()
    assert exp.satisfied("ns/vmi")


@pytest.mark.parametrize(
    ("expected", "observed", "satisfied"),
    [
        pytest.param(1, 0, False, id="pending"),
        pytest.param(1, 1, True, id="observed"),
        pytest.param(2, 1, False, id="one-of-two"),
        pytest.param(2, 3, True, id="extra-observations-are-harmless"),
        pytest.param(0, 0, True, id="expect-zero"),
    ],
)
def test_creations_are_counted(expected: int, observed: int, satisfied: bool) -> None:
    """Satisfied once as many creations were observed as expected."""
    exp, _ = make()
    exp.expect_creations("ns/vmi", expected)
    for _ in range(observed):
        exp.creation_observed("ns/vmi")
    assert exp.satisfied("ns/vmi") is satisfied


def test_failed_write_is_observed_immediately() -> None:
    """The controller lowers the expectation itself when its create fails."""
    exp, _ = make()
    exp.expect_creations("ns/vmi", 1)
    exp.creation_observed("ns/vmi")  # the create call raised
    assert exp.satisfied("ns/vmi")
    assert len(exp) == 0


def test_deletions_are_tracked_by_uid() -> None:
    """Only the deletion of an expected UID counts."""
    exp, _ = make()
    exp.expect_deletions("ns/vmi", ["uid-1", "uid-2"])
    exp.deletion_observed("ns/vmi", "uid-other")
    exp.deletion_observed("ns/vmi", "uid-1")
    assert not exp.satisfied("ns/vmi")
    assert exp.pending("ns/vmi") == Pending(adds=0, deletions=frozenset({"uid-2"}))
    exp.deletion_observed("ns/vmi", "uid-2")
    assert exp.satisfied("ns/vmi")


def test_duplicate_deletion_events_count_once() -> None:
    """Seeing the same UID deleted twice lowers the expectation once."""
    exp, _ = make()
    exp.expect_deletions("ns/vmi", ["uid-1", "uid-2"])
    exp.deletion_observed("ns/vmi", "uid-1")
    exp.deletion_observed("ns/vmi", "uid-1")
    assert not exp.satisfied("ns/vmi")


def test_creations_and_deletions_both_gate() -> None:
    """Pending creations and pending deletions each keep the key unsatisfied."""
    exp, _ = make()
    exp.expect_creations("ns/vmi", 1)
    exp.expect_deletions("ns/vmi", ["uid-old"])
    exp.creation_observed("ns/vmi")
    assert not exp.satisfied("ns/vmi")
    exp.deletion_observed("ns/vmi", "uid-old")
    assert exp.satisfied("ns/vmi")


@pytest.mark.parametrize(
    ("age", "satisfied"),
    [
        pytest.param(299.0, False, id="young"),
        pytest.param(300.5, True, id="expired"),
    ],
)
def test_expectations_expire_after_ttl(age: float, satisfied: bool) -> None:
    """An unobserved expectation stops blocking once older than the TTL, with a warning."""
    exp, clock = make()
    exp.expect_creations("ns/vmi", 1)
    clock.advance(age)
    with capture_logs() as logs:
        assert exp.satisfied("ns/vmi") is satisfied
    assert [e["event"] for e in logs] == (["expectations_expired"] if satisfied else [])


def test_resetting_refreshes_the_ttl() -> None:
    """Setting expectations again restarts the TTL clock."""
    exp, clock = make()
    exp.expect_creations("ns/vmi", 1)
    clock.advance(250)
    exp.expect_creations("ns/vmi", 1)
    clock.advance(250)
    assert not exp.satisfied("ns/vmi")


def test_delete_forgets_key() -> None:
    """delete() drops whatever was pending (the object is gone)."""
    exp, _ = make()
    exp.expect_creations("ns/vmi", 3)
    exp.delete("ns/vmi")
    assert exp.satisfied("ns/vmi")
    exp.creation_observed("ns/vmi")  # late events for a forgotten key are ignored
    assert exp.pending("ns/vmi") == Pending(adds=0, deletions=frozenset())


def test_keys_are_independent() -> None:
    """Observations for one key never satisfy another."""
    exp, _ = make()
    exp.expect_creations("ns/a", 1)
    exp.expect_creations("ns/b", 1)
    exp.creation_observed("ns/a")
    assert exp.satisfied("ns/a")
    assert not exp.satisfied("ns/b")
