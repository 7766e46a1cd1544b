"""corev1 Events, recorded as client-go's EventRecorder does, so `kubectl describe vmi`
tells what happened to an object.

    recorder.event(vmi, EventType.NORMAL, "Started", "VirtualMachineInstance started.")

- `event()` never blocks and never raises: it goes through a spam filter (a token bucket
  per source + object + type + reason, client-go's burst 25 refilled one per 5 minutes),
  then onto a bounded queue; a full queue drops the event with a warning log.
- `run()` (one task in the daemon's TaskGroup) drains the queue. An event equal to one
  already written (same source, object, type, reason and message) is aggregated: its
  `count` is patched up by one and `lastTimestamp` moved, as client-go's EventCorrelator
  does; a vanished Event is created anew. Write errors are logged, never raised.
- `forget(uid)` once the object is gone: its spam buckets go at once, its aggregation
  entries once the events queued before it are written (both tables are LRUs bounded by
  `cache_size`, but a gone object's entries would otherwise sit there until pushed out).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

import structlog

from shared.kube.errors import KubeError, NotFound
from shared.kube.metrics import Registry
from shared.kube.ratelimit import MonotonicClock, RateLimit, TokenBucket
from shared.kube.resources import EVENTS, Resource
from shared.model import API_VERSION, Clock, KubeObject, format_time, utc_now
from shared.naming import SUBDOMAIN, fit
from shared.tasks import cancelling

log = structlog.get_logger("kube.events")


class EventType(StrEnum):
    """corev1 Event types."""

    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """An Event's involvedObject."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: str = ""

    @classmethod
    def of(cls, obj: KubeObject) -> ObjectRef:
        """The reference to a typed object (its class's kind when the object has none)."""
        meta = obj.metadata
        return cls(
            api_version=obj.api_version or API_VERSION,
            kind=obj.kind or type(obj).KIND,
            namespace=meta.namespace or "",
            name=meta.name or "",
            uid=meta.uid or "",
            resource_version=meta.resource_version or "",
        )

    def to_dict(self) -> dict[str, str]:
        ref = {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "uid": self.uid,
        }
        if self.resource_version:
            ref["resourceVersion"] = self.resource_version
        return ref


# client-go's EventSourceObjectSpamFilter: burst 25, one more every 5 minutes.
SPAM_LIMIT = RateLimit(qps=1 / 300, burst=25)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecorderConfig:
    """Who records (source.component / source.host) and the recorder's bounds."""

    component: str
    host: str = ""
    queue_size: int = 1000
    spam_limit: RateLimit = SPAM_LIMIT
    # How many written events are remembered for aggregation (LRU), and spam buckets.
    cache_size: int = 4096
    write_timeout: float = 10.0


class Recorder(Protocol):
    """What controllers call; `EventRecorder` and `DiscardRecorder` implement it."""

    def event(self, obj: KubeObject, type_: EventType, reason: str, message: str) -> None: ...

    def forget(self, uid: str) -> None:
        """The object with `uid` is gone: drop what is kept about its events."""


class DiscardRecorder:
    """Records nothing (tests and tools that do not care about events)."""

    def event(self, obj: KubeObject, type_: EventType, reason: str, message: str) -> None:
        return None

    def forget(self, uid: str) -> None:
        return None


class EventClient(Protocol):
    """The two KubeClient calls the recorder makes."""

    async def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]: ...

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class _Pending:
    ref: ObjectRef
    type_: EventType
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class _Forget:
    uid: str


@dataclass(slots=True)
class _Written:
    name: str
    count: int
    first: str


V = TypeVar("V")
_UID = 3  # where the involved object's uid sits in both tables' keys


class _Table(Generic[V]):
    """An LRU keyed by (kind, namespace, name, uid, ...) whose entries of one uid can be
    dropped together."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, ...], V] = OrderedDict()
        self._by_uid: dict[str, set[tuple[str, ...]]] = {}

    def get(self, key: tuple[str, ...]) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: tuple[str, ...], value: V) -> None:
        self._items[key] = value
        self._by_uid.setdefault(key[_UID], set()).add(key)
        while len(self._items) > self._size:
            self.pop(next(iter(self._items)))

    def pop(self, key: tuple[str, ...]) -> None:
        self._items.pop(key, None)
        keys = self._by_uid.get(key[_UID])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_uid[key[_UID]]

    def forget(self, uid: str) -> bool:
        """Drop `uid`'s entries; False when there were none."""
        keys = self._by_uid.pop(uid, ())
        for key in keys:
            self._items.pop(key, None)
        return bool(keys)

    def uids(self) -> set[str]:
        return set(self._by_uid)

    def __len__(self) -> int:
        return len(self._items)


class EventRecorder:
    """Non-blocking, rate-limited, aggregating corev1 Event recorder."""

    def __init__(
        self,
        client: EventClient,
        config: RecorderConfig,
        *,
        registry: Registry | None = None,
        clock: MonotonicClock = time.monotonic,
        wall: Clock = utc_now,
    ) -> None:
        self._client = client
        self._config = config
        self._clock = clock
        self._wall = wall
        self._queue: asyncio.Queue[_Pending | _Forget] = asyncio.Queue(maxsize=config.queue_size)
        self._spam: _Table[TokenBucket] = _Table(config.cache_size)
        self._written: _Table[_Written] = _Table(config.cache_size)
        self._dropped = (registry or Registry()).counter(
            "kubevirt_py_events_dropped_total",
            "Events not recorded, by why (rate_limited, queue_full, write_failed).",
            ("why",),
        )

    # ---- the caller's side (never blocks, never raises) ---------------------------------

    def event(self, obj: KubeObject, type_: EventType, reason: str, message: str) -> None:
        """Queue one event about `obj`, unless its spam bucket is empty or the queue full."""
        pending = _Pending(ObjectRef.of(obj), type_, reason, message)
        if not self._spam_bucket(pending).try_acquire():
            self._dropped.labels("rate_limited").inc()
            log.debug("event_rate_limited", reason=reason, object=pending.ref.name)
            return
        try:
            self._queue.put_nowait(pending)
        except asyncio.QueueFull:
            self._dropped.labels("queue_full").inc()
            log.warning("event_dropped_queue_full", reason=reason, object=pending.ref.name)

    def forget(self, uid: str) -> None:
        """The object with `uid` is gone: its spam buckets are dropped now, its aggregation
        entries after the events already queued for it are written."""
        if not uid:
            return
        if not self._spam.forget(uid):  # nothing was queued about it (or it aged out)
            self._written.forget(uid)
            return
        try:
            self._queue.put_nowait(_Forget(uid))
        except asyncio.QueueFull:
            self._written.forget(uid)

    def _spam_bucket(self, p: _Pending) -> TokenBucket:
        ref = p.ref
        key = (ref.kind, ref.namespace, ref.name, ref.uid, str(p.type_), p.reason)
        bucket = self._spam.get(key)
        if bucket is None:
            bucket = TokenBucket(self._config.spam_limit, clock=self._clock)
            self._spam.put(key, bucket)
        return bucket

    # ---- the writer task -------------------------------------------------------------

    def tracked(self) -> int:
        """Objects the recorder keeps spam buckets or aggregation entries for."""
        return len(self._spam.uids() | self._written.uids())

    @property
    def pending(self) -> int:
        """Events queued and not yet written."""
        return self._queue.qsize()

    async def run(self) -> None:
        """Write queued events until cancelled."""
        while True:
            await self._write_one(await self._queue.get())

    async def drain(self) -> None:
        """Write every queued event now (tests, and a daemon's last words)."""
        while not self._queue.empty():
            await self._write_one(self._queue.get_nowait())

    async def _write_one(self, p: _Pending | _Forget) -> None:
        """Create or aggregate one event; errors are logged and counted, never raised."""
        if isinstance(p, _Forget):
            self._written.forget(p.uid)
            return
        try:
            async with asyncio.timeout(self._config.write_timeout):
                await self._write(p)
        except (KubeError, TimeoutError) as e:
            if isinstance(e, TimeoutError) and cancelling():
                raise
            self._dropped.labels("write_failed").inc()
            log.warning("event_write_failed", reason=p.reason, object=p.ref.name, error=str(e))

    async def _write(self, p: _Pending) -> None:
        key = self._aggregation_key(p)
        now = format_time(self._wall())
        seen = self._written.get(key)
        if seen is not None:
            try:
                await self._client.patch(
                    EVENTS,
                    seen.name,
                    {"count": seen.count + 1, "lastTimestamp": now, "message": p.message},
                    namespace=p.ref.namespace,
                )
                seen.count += 1
                return
            except NotFound:
                self._written.pop(key)
        name = event_name(p.ref.name, f"{time.time_ns():x}{secrets.token_hex(2)}")
        await self._client.create(EVENTS, self._body(p, name, now), namespace=p.ref.namespace)
        self._written.put(key, _Written(name=name, count=1, first=now))

    def _aggregation_key(self, p: _Pending) -> tuple[str, ...]:
        r = p.ref
        return (r.kind, r.namespace, r.name, r.uid, str(p.type_), p.reason, p.message)

    def _body(self, p: _Pending, name: str, now: str) -> dict[str, Any]:
        source = {"component": self._config.component}
        if self._config.host:
            source["host"] = self._config.host
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": p.ref.namespace},
            "involvedObject": p.ref.to_dict(),
            "type": str(p.type_),
            "reason": p.reason,
            "message": p.message,
            "source": source,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
        }


def event_name(involved: str, unique: str) -> str:
    """client-go's `<involved>.<unique>`, the involved name cut with a hash (shared.naming)
    so a 253-character object's events still fit an Event's name."""
    return f"{fit(involved, limit=SUBDOMAIN - len(unique) - 1)}.{unique}"
