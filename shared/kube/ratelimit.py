"""Rate limiting and backoff: a token bucket for API calls, exponential backoff for retries.

- `TokenBucket`: client-side QPS/burst, as client-go's flowcontrol limiter (KubeVirt runs the
  controller at 200 QPS / 400 burst and the handler at 50 / 100). Waiters reserve a token
  first and then sleep for their own delay, so they are served in arrival order without
  a lock and the bucket never over-grants.
- `Backoff`: one retry loop's growing delay (informer relists, leader retries).
- `ItemBackoff`: per-key exponential failure backoff with a cap (client-go's
  ItemExponentialFailureRateLimiter), used by the work queue's `add_rate_limited`.

Clocks and sleeps are injected so tests drive time by hand.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass

MonotonicClock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class RateLimit:
    """Sustained requests per second and the burst allowed on top; qps ≤ 0 disables limiting."""

    qps: float
    burst: int

    def __post_init__(self) -> None:
        if self.qps > 0 and self.burst < 1:
            raise ValueError("burst must be ≥ 1 when qps is limited")


CONTROLLER_RATE_LIMIT = RateLimit(qps=200.0, burst=400)
HANDLER_RATE_LIMIT = RateLimit(qps=50.0, burst=100)
UNLIMITED = RateLimit(qps=0.0, burst=0)


class TokenBucket:
    """A token bucket refilled at `qps` up to `burst` tokens."""

    def __init__(
        self,
        limit: RateLimit,
        *,
        clock: MonotonicClock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._limit = limit
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(limit.burst)
        self._last = clock()

    @property
    def limited(self) -> bool:
        """False when the bucket lets everything through."""
        return self._limit.qps > 0

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._last)
        self._last = now
        self._tokens = min(float(self._limit.burst), self._tokens + elapsed * self._limit.qps)

    def try_acquire(self) -> bool:
        """Take a token if one is available now; never waits."""
        if not self.limited:
            return True
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def reserve(self) -> float:
        """Take a token now, possibly on credit; returns the seconds to wait before using it."""
        if not self.limited:
            return 0.0
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self._limit.qps

    async def acquire(self) -> float:
        """Wait for a token; returns how long the caller waited (for the limiter metric)."""
        delay = self.reserve()
        if delay > 0:
            try:
                await self._sleep(delay)
            except asyncio.CancelledError:
                self._tokens += 1.0  # give the unused reservation back
                raise
        return delay


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """Exponential backoff: `initial` * `factor`^n, capped, with ± `jitter` fraction."""

    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 0.1


class Backoff:
    """The growing delay of one retry loop; `reset()` after a success."""

    def __init__(self, policy: BackoffPolicy, *, rand: Callable[[], float] = random.random) -> None:
        self._policy = policy
        self._rand = rand
        self._failures = 0

    @property
    def failures(self) -> int:
        """Consecutive failures since the last reset."""
        return self._failures

    def next_delay(self) -> float:
        """The delay before the next attempt; each call counts one more failure."""
        p = self._policy
        base = min(p.cap, p.initial * p.factor ** min(self._failures, 64))
        self._failures += 1
        spread = base * p.jitter * (2.0 * self._rand() - 1.0)
        return max(0.0, min(p.cap, base + spread))

    def reset(self) -> None:
        """Forget past failures."""
        self._failures = 0


@dataclass(frozen=True, slots=True)
class ItemBackoffPolicy:
    """Per-key retry delays: base * 2^failures, capped (client-go: 5 ms … 1000 s)."""

    base: float = 0.005
    cap: float = 300.0


class ItemBackoff:
    """Per-key exponential failure backoff; `forget` when the key finally succeeds."""

    def __init__(self, policy: ItemBackoffPolicy) -> None:
        self._policy = policy
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        """The delay before retrying `key`; counts one more failure for it."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        return min(self._policy.cap, self._policy.base * 2.0 ** min(n, 64))

    def retries(self, key: Hashable) -> int:
        """Failures counted for `key` since it was last forgotten."""
        return self._failures.get(key, 0)

    def forget(self, key: Hashable) -> None:
        """Reset `key`'s failures."""
        self._failures.pop(key, None)

    def __len__(self) -> int:
        return len(self._failures)
