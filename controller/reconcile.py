"""What every controller loop shares: the process() wrapper around sync(), and pod writes
guarded by expectations.

    process(key): bind the key to the log → sync(key) → forget the key's backoff;
                  SyncError → log its reason, requeue with backoff when it can help;
                  API or transport errors → requeue with backoff;
                  anything else → Synchronized=False on the object (the exception's class
                  and message, controller/failures.py), requeue with backoff; the next
                  successful sync clears it.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import structlog

from controller.deps import Deps
from controller.errors import SyncError
from controller.failures import failure_target
from shared.kube import (
    PODS,
    AlreadyExists,
    ApiError,
    Conflict,
    DeleteOptions,
    DiscardRecorder,
    EventType,
    Expectations,
    KubeClient,
    NotFound,
    Recorder,
    Resource,
    TransportError,
    WorkQueue,
)
from shared.kube.syncfailure import CLEAR_RETRY, SyncFailures
from shared.launcherpod import LauncherPod
from shared.model import ConditionReason, KubeObject, ObjectMeta

log = structlog.get_logger("controller")


M = TypeVar("M", bound=KubeObject)
T = TypeVar("T")


def live(value: T | Callable[[], T]) -> Callable[[], T]:
    """`value` read at each use: a Callable as it is (the KubeVirt CR's live values,
    controller/kubevirt), a fixed value wrapped."""
    return value if callable(value) else lambda: value


def refresher(
    client: KubeClient, resource: Resource, model: type[M], key: str
) -> Callable[[], Awaitable[M]]:
    """A status writer's `refresh`: GET the object fresh from the API server."""
    ns, _, name = key.partition("/")

    async def refresh() -> M:
        return model.from_dict(await client.get(resource, name, namespace=ns or None))

    return refresh


def apply_metadata(
    meta: ObjectMeta,
    finalizer: str,
    *,
    keep: bool | None,
    labels: Mapping[str, str | None] | None = None,
) -> ObjectMeta:
    """`meta` with label changes (None removes) and `finalizer` kept (True), dropped
    (False) or left as it is (None)."""
    new_labels = dict(meta.labels)
    for name, value in (labels or {}).items():
        if value is None:
            new_labels.pop(name, None)
        else:
            new_labels[name] = value
    finalizers = list(meta.finalizers)
    if keep is True and finalizer not in finalizers:
        finalizers.append(finalizer)
    elif keep is False and finalizer in finalizers:
        finalizers.remove(finalizer)
    return dataclasses.replace(meta, labels=new_labels, finalizers=tuple(finalizers))


class Reconciler(abc.ABC):
    """A controller loop: a queue of keys and a sync per key."""

    #: The log field the key is bound to ("vmi", "vm", "vmim", "node").
    kind: str = "key"
    #: The informer the keys come from: an unexpected error becomes a condition on its
    #: object (None: logged only).
    synchronized_on: str | None = None

    def __init__(self, deps: Deps, queue: WorkQueue) -> None:
        self.queue = queue
        self._client = deps.client
        self._informers = deps.informers
        self._clock = deps.clock
        self._recorder = deps.recorder
        self._vmi_recent = deps.vmi_recent
        self._vmi_writer = deps.vmi_writer
        target = failure_target(deps.informers, self.synchronized_on)
        self._sync_failures = SyncFailures(deps.client, target)

    @abc.abstractmethod
    async def sync(self, key: str) -> None:
        """Make the world match the object at `key` (read from the caches)."""

    async def process(self, key: str) -> None:
        """One work item: sync, then forget or requeue."""
        with structlog.contextvars.bound_contextvars(**{self.kind: key}):
            try:
                await self.sync(key)
            except SyncError as e:
                log.warning("sync_failed", reason=e.reason, error=e.message)
                if e.requeue:
                    self.queue.add_rate_limited(key)
                else:
                    self.queue.forget(key)
                return
            except Conflict as e:
                log.info("sync_conflict", error=str(e))
                self.queue.add_rate_limited(key)
                return
            except (ApiError, TransportError) as e:
                log.warning("sync_api_error", error=str(e))
                self.queue.add_rate_limited(key)
                return
            except Exception as e:  # task boundary: unforeseen, so shown on the object
                await self._sync_failures.failed(key, e)
                self.queue.add_rate_limited(key)
                return
            self.queue.forget(key)
            if not await self._sync_failures.succeeded(key):
                self.queue.add_after(key, CLEAR_RETRY)

    def enqueue(self, key: str | None) -> None:
        """Queue `key` (None is ignored, so handlers can pass lookups straight in)."""
        if key:
            self.queue.add(key)


class PodWriter:
    """Creates and deletes pods with expectations set before each write."""

    def __init__(
        self, client: KubeClient, expectations: Expectations, recorder: Recorder | None = None
    ) -> None:
        self._client = client
        self.expectations = expectations
        self._recorder = recorder or DiscardRecorder()

    async def create(
        self,
        key: str,
        body: Mapping[str, Any],
        *,
        involved: KubeObject | None = None,
        what: str = "virtual machine pod",
    ) -> None:
        """Create one pod for `key`; AlreadyExists means the cache lags (still expected).
        SuccessfulCreate / FailedCreate events go on `involved` (KubeVirt's: on the VMI)."""
        meta = body["metadata"]
        self.expectations.expect_creations(key, 1)
        try:
            await self._client.create(PODS, body, namespace=meta["namespace"])
        except AlreadyExists:
            log.info("launcher_pod_exists", pod=meta["name"])
            return
        except (ApiError, TransportError) as e:
            self.expectations.creation_observed(key)
            self._event(involved, EventType.WARNING, "FailedCreate", f"Error creating pod: {e}")
            raise SyncError(ConditionReason.FAILED_CREATE, f"pod {meta['name']}: {e}") from e
        log.info("launcher_pod_created", pod=meta["name"])
        self._event(
            involved, EventType.NORMAL, "SuccessfulCreate", f"Created {what} {meta['name']}"
        )

    def _event(self, obj: KubeObject | None, type_: EventType, reason: str, message: str) -> None:
        if obj is not None:
            self._recorder.event(obj, type_, reason, message)

    async def delete(
        self, key: str, pods: Iterable[LauncherPod], *, involved: KubeObject | None = None
    ) -> None:
        """Delete these pods (by UID precondition) and expect their disappearance."""
        doomed = list(pods)
        if not doomed:
            return
        self.expectations.expect_deletions(key, [p.uid for p in doomed])
        for pod in doomed:
            try:
                await self._client.delete(
                    PODS, pod.name, namespace=pod.namespace, options=DeleteOptions(uid=pod.uid)
                )
            except (NotFound, Conflict):
                self.expectations.deletion_observed(key, pod.uid)
            except (ApiError, TransportError) as e:
                self.expectations.deletion_observed(key, pod.uid)
                message = f"Error deleting pod {pod.name}: {e}"
                self._event(involved, EventType.WARNING, "FailedDelete", message)
                raise SyncError(ConditionReason.FAILED_DELETE, f"pod {pod.name}: {e}") from e
            else:
                log.info("launcher_pod_deleted", pod=pod.name)
                message = f"Deleted virtual machine pod {pod.name}"
                self._event(involved, EventType.NORMAL, "SuccessfulDelete", message)
