"""An unexpected sync error as a condition on the object (KubeVirt's Failure habit): an
exception a loop did not foresee (not its typed SyncError) becomes

    status.conditions[type=Synchronized] = {status: False, reason: <exception class>,
                                            message: <its message>}

so the object says why it does not move instead of a log line nobody reads. Shared by the
controller's loops and the handler's.

- Rate-limited: the write is skipped when the object already says so, and made at most
  once per `min_interval` per key while the error changes (no write per retry).
- Cleared on the next successful sync: a Synchronized=False this writer made (remembered
  per key), or, on kinds whose own logic never sets Synchronized (`owns_condition`), any
  Synchronized=False, so a condition a previous leader wrote goes too.
- The log keeps the traceback once per key and distinct error; a repeat is one line.

Writes are merge patches of status.conditions at the cached resourceVersion: a Conflict
means the cache is behind, and the next retry (or the requeue a failed clear asks for)
writes from fresher state.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import structlog

from shared.kube.errors import KubeError
from shared.kube.ports import Patches
from shared.kube.resources import Resource
from shared.model import KubeObject, format_time, utc_now
from shared.tasks import cancelling

log = structlog.get_logger("shared.kube.syncfailure")

SYNCHRONIZED = "Synchronized"
MAX_MESSAGE = 1024
#: Keys remembered (failed, not yet cleared); the oldest are dropped past this.
MAX_KEYS = 4096
WRITE_TIMEOUT = 10.0
#: Seconds before a loop retries clearing a condition whose clearing write failed.
CLEAR_RETRY = 1.0


@dataclass(frozen=True, slots=True)
class Failure:
    """What the condition says: the exception's class and its message."""

    reason: str
    message: str

    @classmethod
    def of(cls, exc: BaseException) -> Failure:
        name = type(exc).__name__
        return cls(reason=name, message=(str(exc) or name)[:MAX_MESSAGE])


def with_failure(
    conditions: list[dict[str, Any]], failure: Failure, now: str
) -> list[dict[str, Any]] | None:
    """`conditions` with Synchronized=False saying `failure`; None when they already do."""
    current = _synchronized(conditions)
    if current is not None and _says(current, failure):
        return None
    cond = {
        "type": SYNCHRONIZED,
        "status": "False",
        "reason": failure.reason,
        "message": failure.message,
        "lastProbeTime": None,
        "lastTransitionTime": now,
    }
    if current is not None and current.get("status") == "False":
        cond["lastTransitionTime"] = current.get("lastTransitionTime") or now
    return [c for c in conditions if c.get("type") != SYNCHRONIZED] + [cond]


def without_failure(
    conditions: list[dict[str, Any]], failure: Failure | None
) -> list[dict[str, Any]] | None:
    """`conditions` without the Synchronized=False saying `failure` (any, when None); None
    when there is nothing to remove."""
    current = _synchronized(conditions)
    if current is None or current.get("status") != "False":
        return None
    if failure is not None and not _says(current, failure):
        return None
    return [c for c in conditions if c.get("type") != SYNCHRONIZED]


def _synchronized(conditions: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((c for c in conditions if c.get("type") == SYNCHRONIZED), None)


def _says(cond: Mapping[str, Any], failure: Failure) -> bool:
    return (cond.get("status"), cond.get("reason"), cond.get("message")) == (
        "False", failure.reason, failure.message,
    )  # fmt: skip


class Lookup(Protocol):
    """The cache a key is read from (an informer's store)."""

    def get(self, key: str) -> KubeObject | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureTarget:
    """Where a loop's keys live: the resource, its cache, and whether the kind's own logic
    leaves Synchronized alone (then any Synchronized=False is this writer's)."""

    resource: Resource
    store: Lookup
    owns_condition: bool = True


class SyncFailures:
    """One loop's unexpected errors, as conditions on its objects and tracebacks in its log."""

    def __init__(
        self,
        client: Patches | None,
        target: FailureTarget | None,
        *,
        min_interval: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._target = target
        self._min_interval = min_interval
        self._monotonic = monotonic
        # key → (the failure last logged/written, when it was written, or None)
        self._seen: OrderedDict[str, tuple[Failure, float | None]] = OrderedDict()

    async def failed(self, key: str, exc: Exception) -> None:
        """Log `exc` (its traceback once per distinct error) and put it on the object, at
        most once per `min_interval` (a new error waits for the interval's end)."""
        failure = Failure.of(exc)
        seen, written = self._seen.get(key, (None, None))
        if seen != failure:
            log.error("sync_unexpected_error", key=key, reason=failure.reason, exc_info=exc)
        else:
            log.warning("sync_unexpected_error_again", key=key, reason=failure.reason,
                        error=failure.message)  # fmt: skip
        now = self._monotonic()
        if (written is None or now - written >= self._min_interval) and await self._write(
            key, failure
        ):
            written = now
        self._remember(key, failure, written)

    async def succeeded(self, key: str) -> bool:
        """Clear the condition a failure left; False when that write failed (retry soon)."""
        seen = self._seen.pop(key, None)
        target = self._target
        if target is None or (seen is None and not target.owns_condition):
            return True
        obj = target.store.get(key)
        if obj is None or not _maybe_failed(obj, remembered=seen is not None):
            return True
        mine = None if target.owns_condition or seen is None else seen[0]
        remaining = without_failure(_conditions(obj), mine)
        if remaining is not None and not await self._patch(obj, remaining):
            if seen is not None:
                self._remember(key, *seen)
            return False
        if seen is not None:
            log.info("sync_recovered", key=key, reason=seen[0].reason)
        return True

    async def _write(self, key: str, failure: Failure) -> bool:
        obj = self._target.store.get(key) if self._target is not None else None
        if obj is None:
            return False
        conditions = with_failure(_conditions(obj), failure, format_time(utc_now()))
        return conditions is None or await self._patch(obj, conditions)

    async def _patch(self, obj: KubeObject, conditions: list[dict[str, Any]]) -> bool:
        assert self._client is not None and self._target is not None, "a target needs a client"
        rv = obj.metadata.resource_version
        body = {"metadata": {"resourceVersion": rv}, "status": {"conditions": conditions}}
        try:
            async with asyncio.timeout(WRITE_TIMEOUT):
                await self._client.patch(
                    self._target.resource, obj.metadata.name or "", body,
                    namespace=obj.metadata.namespace, subresource="status",
                )  # fmt: skip
        except (KubeError, TimeoutError) as e:
            if cancelling():
                raise
            log.info("sync_condition_not_written", name=obj.metadata.name, error=str(e))
            return False
        return True

    def _remember(self, key: str, failure: Failure, written: float | None) -> None:
        self._seen[key] = (failure, written)
        self._seen.move_to_end(key)
        while len(self._seen) > MAX_KEYS:
            self._seen.popitem(last=False)


def _maybe_failed(obj: KubeObject, *, remembered: bool) -> bool:
    """A Synchronized=False among the model's conditions (cheap: no encoding); for a model
    that keeps no conditions, only a failure this writer remembers (encoding every object
    at every sync to look would cost more than a stale condition after a restart)."""
    conditions = getattr(getattr(obj, "status", None), "conditions", None)
    if conditions is None:
        return remembered
    return any(
        str(getattr(c, "type", "")) == SYNCHRONIZED and str(getattr(c, "status", "")) == "False"
        for c in conditions
    )


def _conditions(obj: KubeObject) -> list[dict[str, Any]]:
    status = obj.to_dict().get("status") or {}
    return [dict(c) for c in status.get("conditions") or () if isinstance(c, Mapping)]
