"""What the restore and clone loops share: a writer of their kind's status, the poll
interval of unfinished objects, the API door, and informer callbacks that queue the key."""

from __future__ import annotations

from typing import Generic, TypeVar

from controller.deps import Deps
from controller.reconcile import Reconciler
from controller.snapshot.kube import SnapshotKube
from shared.kube import Handlers, StatusWriter, WorkQueue
from shared.model import KubeObject

POLL_SECONDS = 1.0
M = TypeVar("M", bound=KubeObject)


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
