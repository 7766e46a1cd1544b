"""The work queue: dedupe, one worker per key, backoff, delays, draining shutdown, metrics."""

from __future__ import annotations

import asyncio
import collections

import pytest
from structlog.testing import capture_logs

from shared.kube.metrics import Counter, Gauge, Registry
from shared.kube.ratelimit import ItemBackoffPolicy
from shared.kube.workqueue import QueueConfig, WorkQueue
from tests.unit.shared.kube.fakes import FakeClock, FakeTimers, eventually


def make_queue(
    registry: Registry | None = None, *, base: float = 0.005, cap: float = 300.0
) -> tuple[WorkQueue, FakeClock, FakeTimers]:
    clock = FakeClock()
    timers = FakeTimers(clock)
    queue = WorkQueue(
        QueueConfig("vmi", retry=ItemBackoffPolicy(base=base, cap=cap)),
        registry=registry or Registry(),
        clock=clock,
        timers=timers,
    )
    return queue, clock, timers


async def test_duplicate_adds_are_queued_once() -> None:
    """Adding a key that is already queued does not queue it twice."""
    queue, _, _ = make_queue()
    for key in ["ns/a", "ns/b", "ns/a", "ns/a"]:
        queue.add(key)
    assert len(queue) == 2
    assert [await queue.get(), await queue.get()] == ["ns/a", "ns/b"]


async def test_key_added_while_processing_waits_for_done() -> None:
    """A key re-added while a worker holds it is not handed out again until done()."""
    queue, _, _ = make_queue()
    queue.add("ns/a")
    key = await queue.get()
    queue.add("ns/a")
    assert len(queue) == 0
    assert queue.is_processing("ns/a")
    assert key is not None
    queue.done(key)
    assert len(queue) == 1
    assert await queue.get() == "ns/a"


async def test_done_without_readd_leaves_queue_empty() -> None:
    """Finishing a key nobody re-added does not requeue it."""
    queue, _, _ = make_queue()
    queue.add("ns/a")
    key = await queue.get()
    assert key is not None
    queue.done(key)
    assert len(queue) == 0


@pytest.mark.parametrize(
    ("failures", "expected_delays"),
    [
        pytest.param(1, [0.005], id="first-retry-is-base"),
        pytest.param(4, [0.005, 0.01, 0.02, 0.04], id="doubles-each-time"),
        pytest.param(8, [0.005, 0.01, 0.02, 0.04, 0.08, 0.1, 0.1, 0.1], id="capped"),
    ],
)
async def test_rate_limited_adds_back_off_exponentially(
    failures: int, expected_delays: list[float]
) -> None:
    """add_rate_limited delays grow base * 2^n up to the cap."""
    queue, clock, timers = make_queue(cap=0.1)
    delays = []
    for _ in range(failures):
        queue.add_rate_limited("ns/a")
        (timer,) = timers.pending()
        delays.append(round(timer.due - clock.now, 6))
        timers.advance(timer.due - clock.now)
        key = await queue.get()
        assert key == "ns/a"
        queue.done(key)
    assert delays == expected_delays
    assert queue.num_requeues("ns/a") == failures


async def test_forget_resets_backoff() -> None:
    """After forget() the next retry starts again from the base delay."""
    queue, clock, timers = make_queue()
    for _ in range(3):
        queue.add_rate_limited("ns/a")
        timers.advance(10)
    queue.forget("ns/a")
    queue.add_rate_limited("ns/a")
    (timer,) = timers.pending()
    assert timer.due - clock.now == pytest.approx(0.005)
    assert queue.num_requeues("ns/a") == 1


async def test_add_after_queues_only_when_due() -> None:
    """A delayed key is invisible until its delay passes."""
    queue, _, timers = make_queue()
    queue.add_after("ns/a", 5.0)
    assert len(queue) == 0
    timers.advance(4.9)
    assert len(queue) == 0
    timers.advance(0.2)
    assert len(queue) == 1


@pytest.mark.parametrize(
    ("first", "second", "due_after"),
    [
        pytest.param(5.0, 1.0, 1.0, id="earlier-replaces-later"),
        pytest.param(1.0, 5.0, 1.0, id="later-is-ignored"),
    ],
)
async def test_add_after_keeps_earliest_delay(
    first: float, second: float, due_after: float
) -> None:
    """Two pending delays for one key collapse to the earlier one."""
    queue, clock, timers = make_queue()
    queue.add_after("ns/a", first)
    queue.add_after("ns/a", second)
    (timer,) = timers.pending()
    assert timer.due - clock.now == pytest.approx(due_after)
    assert queue.pending_delayed() == 1


async def test_add_after_zero_adds_immediately() -> None:
    """A non-positive delay is a plain add."""
    queue, _, timers = make_queue()
    queue.add_after("ns/a", 0)
    assert len(queue) == 1
    assert timers.pending() == []


async def test_shutdown_drains_queued_keys_then_stops_workers() -> None:
    """After shut_down workers still process what was queued, ignore new adds, and return."""
    queue, _, timers = make_queue()
    for key in ["ns/a", "ns/b", "ns/c"]:
        queue.add(key)
    queue.add_after("ns/later", 1.0)
    processed: list[str] = []

    async def process(key: str) -> None:
        processed.append(key)
        queue.add("ns/new")  # ignored: shutting down

    queue.shut_down()
    await queue.run_workers(2, process)
    assert sorted(processed) == ["ns/a", "ns/b", "ns/c"]
    assert timers.pending() == []
    assert len(queue) == 0


async def test_idle_workers_return_on_shutdown() -> None:
    """Workers blocked on an empty queue return once it is shut down."""
    queue, _, _ = make_queue()

    async def process(key: str) -> None:
        raise AssertionError("nothing to process")

    async with asyncio.TaskGroup() as tg:
        workers = tg.create_task(queue.run_workers(3, process))
        await asyncio.sleep(0)
        queue.shut_down()
    assert workers.done()


async def test_workers_never_process_one_key_concurrently() -> None:
    """With many workers and a key re-added mid-processing, it is processed serially and again."""
    queue, _, _ = make_queue()
    active: collections.Counter[str] = collections.Counter()
    runs: collections.Counter[str] = collections.Counter()
    overlap: list[str] = []
    readded = asyncio.Event()

    async def process(key: str) -> None:
        active[key] += 1
        if active[key] > 1:
            overlap.append(key)
        runs[key] += 1
        if key == "ns/hot" and not readded.is_set():
            readded.set()
            queue.add("ns/hot")
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        active[key] -= 1
        if sum(runs.values()) == 6:
            queue.shut_down()

    for key in ["ns/hot", "ns/a", "ns/b", "ns/c", "ns/d"]:
        queue.add(key)
    await queue.run_workers(4, process)
    assert overlap == []
    assert runs["ns/hot"] == 2


async def test_failing_process_is_logged_and_retried() -> None:
    """An exception escaping process() is logged and the key re-added with backoff."""
    queue, _, timers = make_queue()
    queue.add("ns/bad")

    async def process(key: str) -> None:
        raise RuntimeError("boom")

    with capture_logs() as logs:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(queue.run_workers(1, process))
            await eventually(lambda: bool(timers.pending()))
            queue.shut_down()
    assert [e["event"] for e in logs] == ["work_item_failed"]
    assert logs[0]["key"] == "ns/bad"
    assert queue.num_requeues("ns/bad") == 1


async def test_cancelling_workers_propagates() -> None:
    """Cancelling run_workers cancels the workers and is not swallowed."""
    queue, _, _ = make_queue()
    started = asyncio.Event()

    async def process(key: str) -> None:
        started.set()
        await asyncio.Event().wait()

    queue.add("ns/a")
    task = asyncio.create_task(queue.run_workers(2, process))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not queue.is_processing("ns/a")


async def test_cancelled_getter_passes_wakeup_on() -> None:
    """A getter cancelled right after being woken does not strand the key it was woken for."""
    queue, _, _ = make_queue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.add("ns/a")
    first.cancel()
    assert await second == "ns/a"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_metrics_follow_queue_activity() -> None:
    """adds, depth, retries, durations and in-flight gauges are kept per queue name."""
    registry = Registry()
    queue, clock, _ = make_queue(registry)
    queue.add("ns/a")
    queue.add("ns/a")
    queue.add("ns/b")
    clock.advance(2.0)
    key = await queue.get()
    assert key is not None
    clock.advance(3.0)

    def value(name: str) -> float:
        family = registry.get(name)
        assert isinstance(family, Counter | Gauge)
        return family.labels("vmi").value

    assert value("kubevirt_workqueue_adds_total") == 2
    assert value("kubevirt_workqueue_depth") == 1
    assert value("kubevirt_workqueue_longest_running_processor_seconds") == 3.0
    assert value("kubevirt_workqueue_unfinished_work_seconds") == 3.0
    queue.done(key)
    queue.add_rate_limited("ns/a")
    assert value("kubevirt_workqueue_retries_total") == 1
    text = registry.render()
    assert 'kubevirt_workqueue_queue_duration_seconds_count{name="vmi"} 1' in text
    assert 'kubevirt_workqueue_work_duration_seconds_sum{name="vmi"} 3' in text
    assert value("kubevirt_workqueue_unfinished_work_seconds") == 0


async def test_run_workers_needs_a_worker() -> None:
    """Zero workers is a programming error."""
    queue, _, _ = make_queue()

    async def process(key: str) -> None:
        return None

    with pytest.raises(ValueError, match="at least one worker"):
        await queue.run_workers(0, process)


async def test_a_closed_gate_drops_adds_delays_and_retries() -> None:
    """While its gate is not set a gated queue keeps nothing: no key, no timer, no backoff,
    no add counted; once set it queues as an ungated queue does."""
    registry = Registry()
    clock = FakeClock()
    timers = FakeTimers(clock)
    gate = asyncio.Event()
    queue = WorkQueue(QueueConfig("vmi"), registry=registry, clock=clock, timers=timers, gate=gate)
    queue.add("ns/a")
    queue.add_after("ns/b", 5.0)
    queue.add_rate_limited("ns/c")
    assert not queue.accepting
    assert (len(queue), queue.pending_delayed(), timers.pending()) == (0, 0, [])
    assert queue.num_requeues("ns/c") == 0
    adds = registry.get("kubevirt_workqueue_adds_total")
    assert isinstance(adds, Counter)
    assert adds.labels("vmi").value == 0

    gate.set()
    queue.add("ns/a")
    queue.add_after("ns/b", 5.0)
    assert queue.accepting
    assert (len(queue), queue.pending_delayed()) == (1, 1)
    timers.advance(5.0)
    assert [await queue.get(), await queue.get()] == ["ns/a", "ns/b"]
