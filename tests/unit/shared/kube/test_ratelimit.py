"""Token bucket, single-loop backoff and per-key backoff."""

from __future__ import annotations

import asyncio

import pytest

from shared.kube.ratelimit import (
    Backoff,
    BackoffPolicy,
    ItemBackoff,
    ItemBackoffPolicy,
    RateLimit,
    TokenBucket,
)
from tests.unit.shared.kube.fakes import FakeClock, RecordingSleep


def test_burst_is_available_at_once() -> None:
    """A fresh bucket grants `burst` tokens without waiting, then refuses."""
    bucket = TokenBucket(RateLimit(qps=1.0, burst=3), clock=FakeClock())
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]


def test_tokens_refill_at_qps_up_to_burst() -> None:
    """Tokens come back at qps per second but never beyond the burst."""
    clock = FakeClock()
    bucket = TokenBucket(RateLimit(qps=2.0, burst=2), clock=clock)
    assert bucket.try_acquire() and bucket.try_acquire()
    clock.advance(0.5)
    assert bucket.try_acquire()
    assert not bucket.try_acquire()
    clock.advance(100)
    assert [bucket.try_acquire() for _ in range(3)] == [True, True, False]


@pytest.mark.parametrize(
    ("limit", "calls", "expected_waits"),
    [
        pytest.param(RateLimit(10.0, 2), 4, [0.0, 0.0, 0.1, 0.2], id="queue-behind-burst"),
        pytest.param(RateLimit(0.0, 0), 3, [0.0, 0.0, 0.0], id="unlimited"),
    ],
)
async def test_acquire_reserves_in_arrival_order(
    limit: RateLimit, calls: int, expected_waits: list[float]
) -> None:
    """Waiters beyond the burst each wait one more token interval than the previous one."""
    sleep = RecordingSleep()
    bucket = TokenBucket(limit, clock=FakeClock(), sleep=sleep)
    waits = [await bucket.acquire() for _ in range(calls)]
    assert waits == pytest.approx(expected_waits)
    assert sleep.delays == pytest.approx([w for w in expected_waits if w > 0])


async def test_cancelled_acquire_returns_its_token() -> None:
    """A waiter cancelled while sleeping gives its reservation back."""

    async def never(_: float) -> None:
        await asyncio.Event().wait()

    clock = FakeClock()
    bucket = TokenBucket(RateLimit(1.0, 1), clock=clock, sleep=never)
    assert bucket.try_acquire()
    waiter = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    clock.advance(1.0)
    assert bucket.try_acquire()


def test_rate_limit_rejects_zero_burst() -> None:
    """A limited rate needs a burst of at least one."""
    with pytest.raises(ValueError, match="burst"):
        RateLimit(qps=5.0, burst=0)


def test_backoff_grows_caps_and_resets() -> None:
    """Backoff doubles from `initial` to `cap`; reset() starts over (no jitter here)."""
    backoff = Backoff(BackoffPolicy(initial=1.0, cap=5.0, jitter=0.0))
    assert [backoff.next_delay() for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    backoff.reset()
    assert backoff.next_delay() == 1.0


@pytest.mark.parametrize(
    ("rand", "expected"),
    [
        pytest.param(0.0, 0.9, id="low-jitter"),
        pytest.param(0.5, 1.0, id="no-jitter"),
        pytest.param(1.0, 1.1, id="high-jitter"),
    ],
)
def test_backoff_jitter_spreads_around_base(rand: float, expected: float) -> None:
    """Jitter moves a delay by up to ± jitter * base."""
    backoff = Backoff(BackoffPolicy(initial=1.0, cap=10.0, jitter=0.1), rand=lambda: rand)
    assert backoff.next_delay() == pytest.approx(expected)


def test_item_backoff_is_per_key() -> None:
    """Each key has its own failure count; forget resets only that key."""
    items = ItemBackoff(ItemBackoffPolicy(base=1.0, cap=100.0))
    assert [items.when("a"), items.when("a"), items.when("b"), items.when("a")] == [1, 2, 1, 4]
    items.forget("a")
    assert items.retries("a") == 0
    assert items.retries("b") == 1
    assert len(items) == 1
