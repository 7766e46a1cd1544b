"""What the restore and clone loops share: a writer of their kind's status, the poll
interval of unfinished objects, the API door, and informer callbacks that queue the key;
`at_once`, for reads and writes that need not wait for each other."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Generic, TypeVar

from controller.deps import Deps
from controller.reconcile import Reconciler
from controller.snapshot.kube import SnapshotKube
from shared.kube import Handlers, StatusWriter, WorkQueue
from shared.model import KubeObject

POLL_SECONDS = 1.0
M = TypeVar("M", bound=KubeObject)
T = TypeVar("T")


class PolledReconciler(Reconciler, Generic[M]):
    """A loop over one snapshot.kubevirt.io / clone.kubevirt.io kind."""

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        writer: StatusWriter[M],
        poll: float = POLL_SECONDS,
    ) -> None:
        super().__init__(deps, queue)
        self._writer = writer
        self._poll = poll
        self._kube = SnapshotKube(deps.client)

    def handlers(self) -> Handlers[M]:
        """Callbacks for the kind's informer: every add and update queues the key."""
        return Handlers(
            on_add=lambda obj: self.enqueue(obj.key),
            on_update=lambda old, new: self.enqueue(new.key),
        )


async def at_once(*calls: Awaitable[T]) -> list[T]:
    """Await the calls concurrently (one round trip, not several); the first failure is
    raised as itself, not as an ExceptionGroup, so a sync's typed errors stay typed."""
    try:
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(_awaited(c)) for c in calls]
    except BaseExceptionGroup as group:
        raise group.exceptions[0] from None
    return [t.result() for t in tasks]


async def _awaited(call: Awaitable[T]) -> T:
    return await call
