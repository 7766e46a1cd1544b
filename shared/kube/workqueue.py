"""The rate-limited work queue every controller loop drains (client-go's workqueue, ported).

Invariants:
- A key is queued at most once (`dirty` dedupes adds).
- A key is processed by at most one worker at a time: a key added while it is being
  processed waits in `dirty` and is queued again by `done()`, so the change is not lost.
- `add_rate_limited` re-adds a key after its per-key exponential backoff; `forget` resets it.
- `add_after` keeps only the earliest pending delay per key.
- `shut_down()` stops accepting keys and cancels pending delays; workers keep draining
  what is already queued, then `run_workers` returns.
- A gated queue (`gate`: the controller's "this replica leads" event) ignores every add,
  delayed add and rate-limited add while its gate is not set: a standby keeps no keys, no
  timers and no backoff (the controller re-queues every cached object when it is elected).

Delays use injected `Timers` (the running loop's `call_later` by default), so no task is
spawned per delayed key and tests can fire timers by hand.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from shared.kube.metrics import WORKQUEUE_BUCKETS, Registry
from shared.kube.ratelimit import ItemBackoff, ItemBackoffPolicy, MonotonicClock

log = structlog.get_logger("shared.kube.workqueue")

Process = Callable[[str], Awaitable[None]]


class TimerHandle(Protocol):
    """What `Timers.call_later` returns."""

    def cancel(self) -> None: ...


class Timers(Protocol):
    """Schedules a plain callback after a delay (no task per timer)."""

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle: ...


class Gate(Protocol):
    """Whether a gated queue accepts keys now (`asyncio.Event` is one)."""

    def is_set(self) -> bool: ...


class LoopTimers:
    """`Timers` on the running event loop."""

    def call_later(self, delay: float, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(delay, callback)


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """A queue's name (the `name` label of its metrics) and its retry backoff."""

    name: str
    retry: ItemBackoffPolicy = field(default_factory=ItemBackoffPolicy)


class _QueueMetrics:
    """The kubevirt_workqueue_* series of one queue."""

    def __init__(self, registry: Registry, name: str) -> None:
        lbl = ("name",)
        self.adds = registry.counter(
            "kubevirt_workqueue_adds_total", "Total number of adds handled by workqueue", lbl
        ).labels(name)
        self.depth = registry.gauge(
            "kubevirt_workqueue_depth", "Current depth of workqueue", lbl
        ).labels(name)
        self.queue_duration = registry.histogram(
            "kubevirt_workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            lbl,
            buckets=WORKQUEUE_BUCKETS,
        ).labels(name)
        self.work_duration = registry.histogram(
            "kubevirt_workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            lbl,
            buckets=WORKQUEUE_BUCKETS,
        ).labels(name)
        self.retries = registry.counter(
            "kubevirt_workqueue_retries_total", "Total number of retries handled by workqueue", lbl
        ).labels(name)
        self.longest = registry.gauge(
            "kubevirt_workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            lbl,
        ).labels(name)
        self.unfinished = registry.gauge(
            "kubevirt_workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration.",
            lbl,
        ).labels(name)


class WorkQueue:
    """A deduplicating, rate-limited FIFO of string keys with N workers."""

    def __init__(
        self,
        config: QueueConfig,
        *,
        registry: Registry,
        clock: MonotonicClock = time.monotonic,
        timers: Timers | None = None,
        gate: Gate | None = None,
    ) -> None:
        self.name = config.name
        self._gate = gate
        self._clock = clock
        self._timers: Timers = timers or LoopTimers()
        self._backoff = ItemBackoff(config.retry)
        self._queue: deque[str] = deque()
        self._dirty: set[str] = set()
        self._processing: dict[str, float] = {}  # key → when a worker took it
        self._enqueued_at: dict[str, float] = {}
        self._waiting: dict[str, tuple[float, TimerHandle]] = {}  # add_after: key → (due, timer)
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self._m = _QueueMetrics(registry, config.name)
        self._m.longest.set_function(self._longest_running)
        self._m.unfinished.set_function(self._unfinished_work)

    # ---- adding -------------------------------------------------------------------------

    @property
    def accepting(self) -> bool:
        """False after shut_down and while the gate (if any) is not set."""
        return not self._shutting_down and (self._gate is None or self._gate.is_set())

    def add(self, key: str) -> None:
        """Queue `key` unless it is already queued; ignored unless `accepting`."""
        if not self.accepting:
            return
        if key in self._dirty:
            return
        self._m.adds.inc()
        self._dirty.add(key)
        self._enqueued_at.setdefault(key, self._clock())
        if key in self._processing:
            return  # done() queues it again
        self._push(key)

    def add_after(self, key: str, delay: float) -> None:
        """Queue `key` after `delay` seconds; an earlier pending delay for it wins."""
        if not self.accepting:
            return
        if delay <= 0:
            self.add(key)
            return
        due = self._clock() + delay
        pending = self._waiting.get(key)
        if pending is not None:
            if pending[0] <= due:
                return
            pending[1].cancel()
        handle = self._timers.call_later(delay, lambda: self._fire(key))
        self._waiting[key] = (due, handle)

    def add_rate_limited(self, key: str) -> None:
        """Queue `key` after its per-key backoff (which grows until `forget`)."""
        if not self.accepting:
            return
        self._m.retries.inc()
        self.add_after(key, self._backoff.when(key))

    def forget(self, key: str) -> None:
        """Reset `key`'s backoff (call after a successful sync)."""
        self._backoff.forget(key)

    def num_requeues(self, key: str) -> int:
        """Rate-limited re-adds of `key` since it was last forgotten."""
        return self._backoff.retries(key)

    def _fire(self, key: str) -> None:
        self._waiting.pop(key, None)
        self.add(key)

    def _push(self, key: str) -> None:
        self._queue.append(key)
        self._m.depth.set(len(self._queue))
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                break

    # ---- taking -------------------------------------------------------------------------

    async def get(self) -> str | None:
        """The next key (now owned by the caller until `done`), or None once shut down and empty."""
        while not self._queue:
            if self._shutting_down:
                return None
            getter = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except asyncio.CancelledError:
                if getter.done() and not getter.cancelled() and self._queue:
                    self._wake_one()  # pass the wake-up on, or the key would sit unclaimed
                raise
        key = self._queue.popleft()
        now = self._clock()
        self._m.depth.set(len(self._queue))
        self._m.queue_duration.observe(max(0.0, now - self._enqueued_at.pop(key, now)))
        self._processing[key] = now
        self._dirty.discard(key)
        return key

    def done(self, key: str) -> None:
        """Release `key`; if it was added meanwhile it is queued again."""
        started = self._processing.pop(key, None)
        if started is not None:
            self._m.work_duration.observe(max(0.0, self._clock() - started))
        if key in self._dirty:
            self._push(key)

    def _wake_one(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    # ---- lifecycle ----------------------------------------------------------------------

    def shut_down(self) -> None:
        """Stop accepting keys, drop pending delays, let workers drain and return."""
        if self._shutting_down:
            return
        self._shutting_down = True
        for _, handle in self._waiting.values():
            handle.cancel()
        self._waiting.clear()
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)

    @property
    def shutting_down(self) -> bool:
        """True once shut_down() was called."""
        return self._shutting_down

    async def run_workers(self, n: int, process: Process) -> None:
        """Run `n` workers in one TaskGroup until shut_down() and drained (or cancelled).

        `process` owns the outcome (forget or add_rate_limited); an exception escaping it
        is logged and the key retried with backoff. Cancellation is never swallowed.
        """
        if n < 1:
            raise ValueError("need at least one worker")
        async with asyncio.TaskGroup() as tg:
            for i in range(n):
                tg.create_task(self._worker(process), name=f"workqueue-{self.name}-{i}")

    async def _worker(self, process: Process) -> None:
        while (key := await self.get()) is not None:
            try:
                await process(key)
            except Exception:  # task boundary: one bad key must not stop the worker
                log.exception("work_item_failed", queue=self.name, key=key)
                self.add_rate_limited(key)
            finally:
                self.done(key)

    # ---- introspection ------------------------------------------------------------------

    def __len__(self) -> int:
        """Keys queued and not yet taken (the depth)."""
        return len(self._queue)

    def is_processing(self, key: str) -> bool:
        """True while a worker holds `key`."""
        return key in self._processing

    def pending_delayed(self) -> int:
        """Keys waiting on add_after / add_rate_limited."""
        return len(self._waiting)

    def _longest_running(self) -> float:
        now = self._clock()
        return max((now - t for t in self._processing.values()), default=0.0)

    def _unfinished_work(self) -> float:
        now = self._clock()
        return sum(now - t for t in self._processing.values())
