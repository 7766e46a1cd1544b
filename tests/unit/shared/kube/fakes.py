"""Small fakes behind the Protocols of shared.kube: a hand-driven clock and timers, an
in-memory API server (optimistic concurrency like the real one) and a scripted list/watch
source."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.kube.api_types import ListResult, PatchType, WatchEvent, WatchEventType
from shared.kube.errors import AlreadyExists, Conflict, NotFound
from shared.kube.mergepatch import merge_apply
from shared.kube.resources import Resource, object_key


class FakeClock:
    """A monotonic clock that only moves when told to."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class FakeTimer:
    due: float
    callback: Callable[[], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeTimers:
    """`Timers` fired by `advance`, on the FakeClock's time."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.timers: list[FakeTimer] = []

    def call_later(self, delay: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(self.clock.now + delay, callback)
        self.timers.append(timer)
        return timer

    def pending(self) -> list[FakeTimer]:
        return [t for t in self.timers if not t.cancelled]

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        due = sorted((t for t in self.pending() if t.due <= self.clock.now), key=lambda t: t.due)
        for timer in due:
            self.timers.remove(timer)
            timer.callback()


class RecordingSleep:
    """A sleep that records the delay and yields once (time never really passes)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(0)


class FakeApi:
    """An in-memory API server: resourceVersions, Conflict on stale writes, status subresource.

    `conflicts_before_write` makes the next N writes fail with Conflict after bumping the
    stored object through `interfere` (another writer's change), as a real race would.
    """

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.rv = 100
        self.calls: list[tuple[str, str]] = []
        self.interfere: Callable[[dict[str, Any]], None] | None = None
        self.conflicts_before_write = 0
        self.fail_next: Exception | None = None
        self.broken: Exception | None = None  # every call fails while set

    def _bump(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        return obj

    def seed(self, resource: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
        stored = self._bump(copy.deepcopy(dict(obj)))
        self.objects[(resource.plural, object_key(stored))] = stored
        return copy.deepcopy(stored)

    def stored(self, resource: Resource, key: str) -> dict[str, Any]:
        return self.objects[(resource.plural, key)]

    def _key(self, resource: Resource, name: str, namespace: str | None) -> tuple[str, str]:
        return (resource.plural, f"{namespace}/{name}" if namespace else name)

    def _check_failure(self) -> None:
        if self.broken is not None:
            raise self.broken
        if self.fail_next is not None:
            err, self.fail_next = self.fail_next, None
            raise err

    def _check_write(self, key: tuple[str, str], rv: str | None) -> dict[str, Any]:
        self._check_failure()
        current = self.objects.get(key)
        if current is None:
            raise NotFound(404, "NotFound", f"{key[1]} not found")
        if self.conflicts_before_write > 0:
            self.conflicts_before_write -= 1
            if self.interfere is not None:
                self.interfere(current)
            self._bump(current)
        if rv is not None and rv != current["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "the object has been modified")
        return current

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        self.calls.append(("get", resource.plural))
        self._check_failure()
        obj = self.objects.get(self._key(resource, name, namespace))
        if obj is None:
            raise NotFound(404, "NotFound", f"{name} not found")
        return copy.deepcopy(obj)

    async def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        self.calls.append(("create", resource.plural))
        self._check_failure()
        key = (resource.plural, object_key(body))
        if key in self.objects:
            raise AlreadyExists(409, "AlreadyExists", f"{key[1]} exists")
        created = self.seed(resource, body)
        self._written(created, status=False)
        return created

    async def update(self, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append(("update", resource.plural))
        key = (resource.plural, object_key(body))
        current = self._check_write(key, body["metadata"].get("resourceVersion"))
        new = copy.deepcopy(dict(body))
        if "status" in current:
            new["status"] = current["status"]
        self.objects[key] = self._bump(new)
        self._written(new, status=False)
        return copy.deepcopy(new)

    async def update_status(self, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append(("update_status", resource.plural))
        key = (resource.plural, object_key(body))
        current = self._check_write(key, body["metadata"].get("resourceVersion"))
        current["status"] = copy.deepcopy(body.get("status") or {})
        self._bump(current)
        self._written(current, status=True)
        return copy.deepcopy(current)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | list[dict[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        self.calls.append(("patch", resource.plural))
        assert isinstance(patch, Mapping) and patch_type is PatchType.MERGE
        key = self._key(resource, name, namespace)
        rv = (patch.get("metadata") or {}).get("resourceVersion")
        current = self._check_write(key, rv)
        if subresource == "status":  # the status subresource ignores metadata changes
            merged = copy.deepcopy(current)
            merged["status"] = merge_apply(current.get("status") or {}, patch.get("status") or {})
        else:
            merged = merge_apply(current, patch)
        self.objects[key] = self._bump(merged)
        self._written(merged, status=subresource == "status")
        return copy.deepcopy(merged)

    def _written(self, obj: dict[str, Any], *, status: bool) -> None:
        """Called after each write with the stored object (`status`: a status write)."""

    def writes(self) -> list[str]:
        return [verb for verb, _ in self.calls if verb != "get"]


@dataclass
class WatchScript:
    """What one watch call does: yield these events, then raise `error` or end."""

    events: list[WatchEvent] = field(default_factory=list)
    error: Exception | None = None
    hang: bool = False


class ScriptedSource:
    """An informer `Source`: lists from a queue of ListResults, watches from scripts.

    When the scripts run out the watch hangs until cancelled (a quiet, healthy watch).
    """

    def __init__(self) -> None:
        self.lists: list[ListResult | Exception] = []
        self.watches: list[WatchScript] = []
        self.list_calls = 0
        self.watch_calls: list[str] = []
        self.watch_done = asyncio.Event()
        self.closed_watches = 0

    async def list(self) -> ListResult:
        self.list_calls += 1
        item = self.lists.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    async def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AsyncGenerator[WatchEvent, None]:
        self.watch_calls.append(resource_version)
        try:
            script = self.watches.pop(0) if self.watches else WatchScript(hang=True)
            for event in script.events:
                yield event
            if script.error is not None:
                raise script.error
            if script.hang:
                self.watch_done.set()
                await asyncio.Event().wait()
        finally:
            self.closed_watches += 1


def pod(
    name: str,
    rv: str,
    *,
    namespace: str = "ns",
    node: str | None = None,
    owner: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A raw Pod dict."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "resourceVersion": rv}
    if labels:
        meta["labels"] = dict(labels)
    if owner:
        meta["ownerReferences"] = [{"uid": owner, "kind": "VirtualMachineInstance"}]
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta}
    if node:
        obj["spec"] = {"nodeName": node}
    return obj


def event(kind: WatchEventType, obj: dict[str, Any]) -> WatchEvent:
    return WatchEvent(kind, obj)


def bookmark(rv: str) -> WatchEvent:
    return WatchEvent(WatchEventType.BOOKMARK, {"kind": "Pod", "metadata": {"resourceVersion": rv}})


async def eventually(cond: Callable[[], bool], *, real: bool = False, limit: float = 5.0) -> None:
    """Let the loop run until `cond()` holds (polling; fails the test after `limit` s)."""
    async with asyncio.timeout(limit):
        while not cond():  # noqa: ASYNC110 — polling another task's state is the point here
            await asyncio.sleep(0.001 if real else 0)
