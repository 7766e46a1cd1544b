"""What the fleet controllers (replica sets, pools) share about the objects they own:
finding an object's owner key by its controller reference, deleting owned objects with
expectations lowered at once when a delete is refused or finds nothing, and the owner
side of their reconcile (`FleetReconciler`: informer events, the sync prelude, the
status write)."""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Callable
from typing import ClassVar, Generic, Protocol, TypeVar

import structlog

from controller.deps import Deps
from controller.recent import Recent
from controller.reconcile import Reconciler, refresher
from shared.kube import (
    ApiError,
    Conflict,
    DeleteOptions,
    EventType,
    Expectations,
    Handlers,
    KubeClient,
    NotFound,
    Recorder,
    Resource,
    StatusWriter,
    TransportError,
    WorkQueue,
)
from shared.model import KubeObject

log = structlog.get_logger("controller.owned")

WRITE_TIMEOUT = 30.0

OwnerT = TypeVar("OwnerT", bound=KubeObject)
OwnerT_co = TypeVar("OwnerT_co", bound=KubeObject, covariant=True)


class _Owners(Protocol[OwnerT_co]):
    def get(self, key: str) -> OwnerT_co | None: ...


def owner_key(obj: KubeObject, *, kind: str, owners: _Owners[KubeObject]) -> str | None:
    """The "namespace/name" key of the `kind` object controlling `obj`, when it exists
    in `owners` with the UID the reference names."""
    ref = obj.metadata.controller_ref()
    if ref is None or ref.kind != kind or not ref.name:
        return None
    key = f"{obj.namespace}/{ref.name}"
    owner = owners.get(key)
    return key if owner is not None and owner.uid == ref.uid else None


async def delete_owned(
    client: KubeClient,
    resource: Resource,
    obj: KubeObject,
    *,
    owner: KubeObject,
    expectations: Expectations,
    recorder: Recorder,
) -> str | None:
    """Delete `obj` (UID precondition); None when done, else the error's text. A refused
    or pointless delete lowers the owner's expectation at once; Events go on the owner."""
    what = f"{resource.kind} {obj.name}"
    try:
        async with asyncio.timeout(WRITE_TIMEOUT):
            await client.delete(resource, obj.name, namespace=obj.namespace,
                                options=DeleteOptions(uid=obj.uid))  # fmt: skip
    except (NotFound, Conflict):
        expectations.deletion_observed(owner.key, obj.uid)
        return None
    except (ApiError, TransportError, TimeoutError) as e:
        expectations.deletion_observed(owner.key, obj.uid)
        recorder.event(owner, EventType.WARNING, "FailedDelete", f"Error deleting {what}: {e}")
        return str(e)
    log.info("owned_deleted", kind=resource.kind, name=obj.name, uid=obj.uid)
    recorder.event(owner, EventType.NORMAL, "SuccessfulDelete", f"Deleted {what} ({obj.uid})")
    return None


def owner_handlers(
    enqueue: Callable[[str], None],
    *,
    recent: Recent[OwnerT],
    expectations: Expectations,
    forget: Callable[[str], None] | None = None,
) -> Handlers[OwnerT]:
    """Callbacks for an owner's informer: any change queues the owner (an update also
    lets `recent` drop a write the cache has caught up with); a deleted owner's
    expectations and remembered writes are dropped, and `forget` called."""

    def updated(old: OwnerT, new: OwnerT) -> None:
        recent.observe(new)
        enqueue(new.key)

    def deleted(owner: OwnerT) -> None:
        expectations.delete(owner.key)
        recent.forget(owner.key)
        if forget is not None:
            forget(owner.key)

    return Handlers(on_add=lambda o: enqueue(o.key), on_update=updated, on_delete=deleted)


class FleetReconciler(Reconciler, Generic[OwnerT]):
    """A controller of owners (`model`, at `resource`) that create and delete the objects
    they own (`owned`): expectations, our recent owner writes, and the owner side of the
    informer events, sync prelude and status write, written once."""

    model: ClassVar[type[KubeObject]]
    resource: ClassVar[Resource]
    owned: ClassVar[Resource]
    #: The log event for an owner that cannot be synced ("pool_invalid").
    invalid_event: ClassVar[str]

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        expectations: Expectations,
        writer: StatusWriter[OwnerT],
    ) -> None:
        super().__init__(deps, queue)
        self.expectations = expectations
        self._writer = writer
        self._recent: Recent[OwnerT] = Recent()

    @abc.abstractmethod
    def _owners(self) -> _Owners[OwnerT]:
        """The owners' cache."""

    @abc.abstractmethod
    def _check(self, owner: OwnerT) -> None:
        """Raise ValueError when `owner` cannot be synced as it is."""

    def _forget(self, key: str) -> None:
        """Drop what the subclass keeps about a gone owner (nothing by default)."""

    def owner_handlers(self) -> Handlers[OwnerT]:
        """Callbacks for the owners' informer."""
        return owner_handlers(
            self.enqueue, recent=self._recent, expectations=self.expectations, forget=self._forget
        )

    def _owner(self, obj: KubeObject) -> str | None:
        """The key of the owner controlling `obj` (matched by name and UID), if any."""
        return owner_key(obj, kind=self.model.KIND, owners=self._owners())

    def _owned_deleted(self, obj: KubeObject) -> None:
        key = self._owner(obj)
        if key is not None:
            self.expectations.deletion_observed(key, obj.uid)
        self.enqueue(key)

    def _current(self, key: str) -> OwnerT | None:
        """The owner at `key` to sync (the newer of cache and our last write); None when
        it is gone (what is kept about it is dropped) or cannot be synced (logged)."""
        owner = self._recent.latest(self._owners().get(key))
        if owner is None:
            self.expectations.delete(key)
            self._forget(key)
            return None
        try:
            self._check(owner)
        except ValueError as e:
            log.warning(self.invalid_event, error=str(e))
            return None
        return owner

    async def _delete_owned(self, owner: OwnerT, obj: KubeObject) -> str | None:
        return await delete_owned(
            self._client,
            self.owned,
            obj,
            owner=owner,
            expectations=self.expectations,
            recorder=self._recorder,
        )

    async def _write_owner(self, owner: OwnerT, new: OwnerT) -> OwnerT | None:
        """Write `new`'s status over `owner`'s; what the write returned, or None when
        nothing was written (no change, or the owner is gone)."""
        refresh = refresher(self._client, self.resource, type(owner), owner.key)
        try:
            written = await self._writer.write_status(owner, new, refresh=refresh)
        except NotFound:
            return None
        if written is owner:
            return None
        self._recent.remember(written)
        return written
