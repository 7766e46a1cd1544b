"""The event recorder: corev1 Events shaped as client-go writes them, repeats aggregated
(count++), a spam filter per object + reason, a bounded queue that never blocks the
caller, and write errors logged instead of raised."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from structlog.testing import capture_logs

from shared.kube.errors import NotFound, ServerError
from shared.kube.events import EventRecorder, EventType, RecorderConfig
from shared.kube.metrics import Registry
from shared.kube.ratelimit import RateLimit
from shared.kube.resources import EVENTS, Resource
from shared.model import ObjectMeta, VirtualMachineInstance


class FakeEvents:
    """Events stored by name; `fail` makes every call raise it."""

    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []
        self.fail: Exception | None = None

    async def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        assert resource is EVENTS and namespace == body["metadata"]["namespace"]
        self.calls.append("create")
        if self.fail:
            raise self.fail
        self.events[body["metadata"]["name"]] = dict(body)
        return dict(body)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        self.calls.append("patch")
        if self.fail:
            raise self.fail
        if name not in self.events:
            raise NotFound(404, "NotFound", name)
        self.events[name].update(patch)
        return self.events[name]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def vmi(name: str = "vm1") -> VirtualMachineInstance:
    return VirtualMachineInstance.new(
        metadata=ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}", resource_version="7")
    )


def make(api: FakeEvents, clock: Clock, **config: Any) -> tuple[EventRecorder, Registry]:
    registry = Registry()
    cfg = RecorderConfig(component="virt-handler", host="node01", **config)
    wall = lambda: datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)  # noqa: E731
    return EventRecorder(api, cfg, registry=registry, clock=clock, wall=wall), registry


async def test_event_has_client_go_shape() -> None:
    """One event: involvedObject, type, reason, message, source and timestamps, count 1."""
    api = FakeEvents()
    rec, _ = make(api, Clock())
    rec.event(vmi(), EventType.NORMAL, "Started", "VirtualMachineInstance started.")
    await rec.drain()
    (event,) = api.events.values()
    assert event["involvedObject"] == {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "namespace": "ns",
        "name": "vm1",
        "uid": "uid-vm1",
        "resourceVersion": "7",
    }
    assert (event["type"], event["reason"], event["message"]) == (
        "Normal",
        "Started",
        "VirtualMachineInstance started.",
    )
    assert event["source"] == {"component": "virt-handler", "host": "node01"}
    assert event["count"] == 1
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2026-01-02T03:04:05Z"
    assert event["metadata"]["name"].startswith("vm1.")


async def test_repeats_are_aggregated() -> None:
    """The same event again patches count up instead of creating another Event; a
    different message is a new Event."""
    api = FakeEvents()
    rec, _ = make(api, Clock())
    for _ in range(3):
        rec.event(vmi(), EventType.WARNING, "FailedCreate", "quota exceeded")
    rec.event(vmi(), EventType.WARNING, "FailedCreate", "other")
    await rec.drain()
    counts = sorted((e["message"], e["count"]) for e in api.events.values())
    assert counts == [("other", 1), ("quota exceeded", 3)]
    assert api.calls == ["create", "patch", "patch", "create"]


async def test_vanished_event_is_created_again() -> None:
    """A remembered Event deleted on the server (TTL) is created anew, count 1."""
    api = FakeEvents()
    rec, _ = make(api, Clock())
    rec.event(vmi(), EventType.NORMAL, "Started", "m")
    await rec.drain()
    api.events.clear()
    rec.event(vmi(), EventType.NORMAL, "Started", "m")
    await rec.drain()
    assert [e["count"] for e in api.events.values()] == [1]
    assert api.calls == ["create", "patch", "create"]


async def test_spam_filter_per_object_and_reason() -> None:
    """Past the burst, one object's reason is dropped (and counted) until the bucket
    refills; another object, or another reason, has its own bucket."""
    api, clock = FakeEvents(), Clock()
    rec, registry = make(api, clock, spam_limit=RateLimit(qps=0.1, burst=2))
    for i in range(4):
        rec.event(vmi(), EventType.WARNING, "FailedCreate", f"try {i}")
    rec.event(vmi(), EventType.NORMAL, "Started", "s")
    rec.event(vmi("vm2"), EventType.WARNING, "FailedCreate", "try 0")
    clock.now += 10.0
    rec.event(vmi(), EventType.WARNING, "FailedCreate", "try 4")
    await rec.drain()
    messages = sorted((e["involvedObject"]["name"], e["message"]) for e in api.events.values())
    assert messages == [
        ("vm1", "s"),
        ("vm1", "try 0"),
        ("vm1", "try 1"),
        ("vm1", "try 4"),
        ("vm2", "try 0"),
    ]
    assert 'kubevirt_py_events_dropped_total{why="rate_limited"} 2' in registry.render()


async def test_full_queue_drops_without_blocking() -> None:
    """With no writer running, events past the queue's size are dropped at once, logged
    and counted: recording never waits on the API server."""
    api = FakeEvents()
    rec, registry = make(api, Clock(), queue_size=2)
    with capture_logs() as logs:
        for name in ("a", "b", "c"):
            rec.event(vmi(name), EventType.NORMAL, "Started", "s")
    assert rec.pending == 2
    assert [e["event"] for e in logs] == ["event_dropped_queue_full"]
    assert 'kubevirt_py_events_dropped_total{why="queue_full"} 1' in registry.render()


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(ServerError(500, "InternalError", "boom"), id="api-error"),
        pytest.param(TimeoutError(), id="timeout"),
    ],
)
async def test_write_errors_are_logged_not_raised(error: Exception) -> None:
    """A failing API server costs the event, logged and counted; the writer carries on."""
    api = FakeEvents()
    api.fail = error
    rec, registry = make(api, Clock())
    rec.event(vmi(), EventType.NORMAL, "Started", "s")
    with capture_logs() as logs:
        await rec.drain()
    assert [e["event"] for e in logs] == ["event_write_failed"]
    assert 'kubevirt_py_events_dropped_total{why="write_failed"} 1' in registry.render()
    api.fail = None
    rec.event(vmi(), EventType.NORMAL, "Started", "s")
    await rec.drain()
    assert len(api.events) == 1


async def test_run_writes_as_events_arrive() -> None:
    """The writer task drains the queue as events are recorded, until cancelled."""
    api = FakeEvents()
    rec, _ = make(api, Clock())
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(rec.run())
        rec.event(vmi(), EventType.NORMAL, "Started", "s")
        for _ in range(50):
            if api.events:
                break
            await asyncio.sleep(0)
        task.cancel()
    assert len(api.events) == 1


async def test_forget_drops_a_gone_objects_entries_after_its_queued_events() -> None:
    """forget(uid) once the object is gone: the events already queued about it are still
    written, and afterwards neither its spam buckets nor its aggregation entries are kept;
    another object's are."""
    api = FakeEvents()
    rec, _ = make(api, Clock())
    rec.event(vmi(), EventType.NORMAL, "SuccessfulCreate", "pod")
    await rec.drain()
    rec.event(vmi(), EventType.NORMAL, "SuccessfulDelete", "pod")
    rec.event(vmi("vm2"), EventType.NORMAL, "Started", "s")
    rec.forget("uid-vm1")
    rec.forget("uid-unknown")
    assert rec.tracked() == 2  # vm1's aggregation entries wait for its queued event
    await rec.drain()
    assert sorted(e["reason"] for e in api.events.values()) == [
        "Started",
        "SuccessfulCreate",
        "SuccessfulDelete",
    ]
    assert rec.tracked() == 1


async def test_entries_pushed_out_of_the_lru_leave_no_index_behind() -> None:
    """Past `cache_size` the oldest entries go, and with them their uid's index entry."""
    api = FakeEvents()
    rec, _ = make(api, Clock(), cache_size=2)
    for name in ("a", "b", "c"):
        rec.event(vmi(name), EventType.NORMAL, "Started", "s")
    await rec.drain()
    assert rec.tracked() == 2
    for name in ("b", "c"):
        rec.forget(f"uid-{name}")
    await rec.drain()
    assert rec.tracked() == 0
