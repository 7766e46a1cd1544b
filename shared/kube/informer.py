"""Informers: a cache of one resource kept true by list + watch, with change handlers.

The reflector loop (client-go's, simplified):
- list (paged, consistent read) → replace the cache, delivering add / update / delete for
  the difference → `has_synced` is set after the first list;
- watch from the list's resourceVersion with bookmarks; every event (bookmarks too)
  advances the resourceVersion the next watch starts from;
- a watch that ends (server timeoutSeconds, dropped connection, the client-side timeout)
  is re-opened from the last resourceVersion; 410 Gone → relist; other errors back off;
- every `resync_period` each cached object is re-delivered as an update (so controllers
  revisit objects even when nothing changed).

Handlers are synchronous and should only enqueue keys; one that raises is logged and the
informer carries on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import structlog

from shared.kube.api_types import ListResult, WatchEvent, WatchEventType
from shared.kube.errors import ApiError, Gone, TransportError
from shared.kube.ratelimit import Backoff, BackoffPolicy, Sleep
from shared.kube.resources import object_key
from shared.kube.store import IndexFunc, Store, default_indexers
from shared.tasks import cancelling

log = structlog.get_logger("shared.kube.informer")

T = TypeVar("T")
Decode = Callable[[dict[str, Any]], T]


class Source(Protocol):
    """List + watch of one resource under one selector (`ListWatch` over the client)."""

    async def list(self) -> ListResult: ...

    def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events after `resource_version`; raises Gone when it is too old."""
        ...


@dataclass(frozen=True, slots=True)
class InformerConfig:
    """Watch timing, resync and retry backoff; resync_period ≤ 0 disables resync."""

    name: str
    resync_period: float = 0.0
    watch_timeout_seconds: int = 300
    # Client-side slack over timeoutSeconds before a silent watch counts as dropped.
    watch_slack: float = 30.0
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)


@dataclass(frozen=True, slots=True)
class Handlers(Generic[T]):
    """Change callbacks; each is optional and must not block."""

    on_add: Callable[[T], None] | None = None
    on_update: Callable[[T, T], None] | None = None
    on_delete: Callable[[T], None] | None = None

    @classmethod
    def each(cls, call: Callable[[T], None]) -> Handlers[T]:
        """`call` on every change: the added, the updated (new) and the deleted object."""
        return cls(on_add=call, on_update=lambda _old, new: call(new), on_delete=call)


def raw(obj: dict[str, Any]) -> dict[str, Any]:
    """The identity decoder: cache raw dicts (Pods, Nodes)."""
    return obj


class Informer(Generic[T]):
    """One resource's cache, kept current by `run()`; read it through `store`."""

    def __init__(
        self,
        source: Source,
        config: InformerConfig,
        *,
        decode: Decode[T],
        indexers: Mapping[str, IndexFunc[T]] | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.name = config.name
        self._source = source
        self._config = config
        self._decode = decode
        self._sleep = sleep
        self.store: Store[T] = Store(default_indexers() if indexers is None else indexers)
        self.has_synced = asyncio.Event()
        self.relists = 0
        # Where the next watch resumes; None forces a relist.
        self.resource_version: str | None = None
        self._versions: dict[str, str] = {}  # key → resourceVersion of the cached object
        self._handlers: list[Handlers[T]] = []
        self._log = log.bind(informer=config.name)

    def add_handlers(self, handlers: Handlers[T]) -> None:
        """Register callbacks; objects already cached are delivered to it as adds."""
        self._handlers.append(handlers)
        if handlers.on_add is not None:
            for obj in self.store.list():
                self._call(handlers.on_add, obj)

    async def run(self) -> None:
        """List, watch and resync until cancelled."""
        async with asyncio.TaskGroup() as tg:
            if self._config.resync_period > 0:
                tg.create_task(self._resync_loop(), name=f"informer-{self.name}-resync")
            await self._reflect()

    def resync(self) -> None:
        """Re-deliver every cached object as an update (old is new)."""
        for obj in self.store.list():
            self._notify_update(obj, obj)

    # ---- the reflector ------------------------------------------------------------------

    async def _reflect(self) -> None:
        backoff = Backoff(self._config.backoff)
        while True:
            try:
                if self.resource_version is None:
                    self.resource_version = await self._relist()
                if await self._watch(self.resource_version):
                    backoff.reset()
                else:  # a watch that closes at once, repeatedly, must not spin
                    await self._sleep(backoff.next_delay())
            except Gone:
                self._log.info(
                    "informer_resource_version_expired", resource_version=self.resource_version
                )
                self.resource_version = None
            except TimeoutError:
                if cancelling():
                    raise
                self._log.info("informer_watch_timed_out", resource_version=self.resource_version)
            except (ApiError, TransportError) as e:
                delay = backoff.next_delay()
                self._log.warning(
                    "informer_request_failed",
                    phase="list" if self.resource_version is None else "watch",
                    error=str(e),
                    retry_in=round(delay, 3),
                )
                await self._sleep(delay)

    async def _relist(self) -> str:
        result = await self._source.list()
        self.relists += 1
        self._replace(result.items)
        self.has_synced.set()
        self._log.info(
            "informer_listed", objects=len(self.store), resource_version=result.resource_version
        )
        return result.resource_version

    async def _watch(self, rv: str) -> int:
        """Consume one watch from `rv`, advancing `resource_version`; returns the event count."""
        delivered = 0
        limit = self._config.watch_timeout_seconds + self._config.watch_slack
        async with asyncio.timeout(limit):
            stream = self._source.watch(
                resource_version=rv, timeout_seconds=self._config.watch_timeout_seconds
            )
            async with contextlib.aclosing(stream):
                async for event in stream:
                    delivered += 1
                    self.resource_version = self._apply(event) or self.resource_version
        return delivered

    async def _resync_loop(self) -> None:
        await self.has_synced.wait()
        while True:
            await self._sleep(self._config.resync_period)
            self.resync()

    # ---- applying changes ---------------------------------------------------------------

    def _apply(self, event: WatchEvent) -> str:
        """Apply one event to the cache and handlers; returns its resourceVersion."""
        rv = event.resource_version
        if event.type is WatchEventType.BOOKMARK:
            return rv
        key = object_key(event.object)
        if event.type is WatchEventType.DELETED:
            old = self.store.remove(key)
            self._versions.pop(key, None)
            final = self._decode_or_none(key, event.object)  # the final state, as client-go
            gone = final if final is not None else old
            if gone is not None:
                self._notify_delete(gone)
            return rv
        obj = self._decode_or_none(key, event.object)
        if obj is not None:
            self._put(key, rv, obj)
        return rv

    def _replace(self, items: Iterable[dict[str, Any]]) -> None:
        """Make the cache equal to a fresh list; unchanged objects are not re-delivered."""
        seen: set[str] = set()
        for item in items:
            key = object_key(item)
            seen.add(key)
            rv = str((item.get("metadata") or {}).get("resourceVersion") or "")
            if key in self._versions and self._versions[key] == rv:
                continue
            obj = self._decode_or_none(key, item)
            if obj is not None:
                self._put(key, rv, obj)
        for key in self.store:
            if key not in seen:
                self._versions.pop(key, None)
                old = self.store.remove(key)
                if old is not None:
                    self._notify_delete(old)

    def _put(self, key: str, rv: str, obj: T) -> None:
        old = self.store.upsert(key, obj)
        self._versions[key] = rv
        if old is None:
            self._notify_add(obj)
        else:
            self._notify_update(old, obj)

    def _decode_or_none(self, key: str, item: dict[str, Any]) -> T | None:
        try:
            return self._decode(item)
        except Exception as e:  # one malformed object must not stop the cache
            self._log.warning("informer_decode_failed", key=key, error=str(e))
            return None

    def _notify_add(self, obj: T) -> None:
        for h in self._handlers:
            if h.on_add is not None:
                self._call(h.on_add, obj)

    def _notify_update(self, old: T, new: T) -> None:
        for h in self._handlers:
            if h.on_update is not None:
                self._call(h.on_update, old, new)

    def _notify_delete(self, obj: T) -> None:
        for h in self._handlers:
            if h.on_delete is not None:
                self._call(h.on_delete, obj)

    def _call(self, fn: Callable[..., None], *args: T) -> None:
        try:
            fn(*args)
        except Exception:  # a handler bug must not stop the cache
            self._log.exception("informer_handler_failed")


async def wait_for_sync(*informers: Informer[Any], timeout: float) -> None:
    """Wait until every informer has listed once; TimeoutError otherwise."""
    async with asyncio.timeout(timeout):
        for informer in informers:
            await informer.has_synced.wait()
