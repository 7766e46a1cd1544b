"""Controller expectations (Kubernetes' ReplicaSet controller, as KubeVirt uses them).

An informer lags the API server. Without expectations a controller that created a pod,
then synced again before the pod informer saw it, would create a second pod. So:

1. `expect_creations(key, n)` *before* the writes;
2. `creation_observed(key)` from the informer's add handler — or right away when a write
   fails, since that object will never be observed;
3. `expect_deletions(key, uids)` before deleting; `deletion_observed(key, uid)` from the
   delete handler (or on a failed delete). Deletions are tracked by UID, so an unrelated
   object's deletion never counts;
4. `satisfied(key)` gates the sync. An expectation older than the TTL (5 min) counts as
   satisfied, so a lost watch event cannot wedge an object forever.

A fulfilled record is dropped at once (no record ≡ satisfied), keeping memory per object at
zero in the steady state.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import structlog

from shared.kube.ratelimit import MonotonicClock

log = structlog.get_logger("shared.kube.expectations")

DEFAULT_TTL_SECONDS = 300.0


@dataclass(slots=True)
class _Record:
    adds: int
    uids: set[str] = field(default_factory=set)
    since: float = 0.0

    @property
    def fulfilled(self) -> bool:
        return self.adds <= 0 and not self.uids


@dataclass(frozen=True, slots=True)
class Pending:
    """What a key still waits for (for logs and tests)."""

    adds: int
    deletions: frozenset[str]


class Expectations:
    """Pending creations (counted) and deletions (by UID) per controller key."""

    def __init__(
        self, *, ttl: float = DEFAULT_TTL_SECONDS, clock: MonotonicClock = time.monotonic
    ) -> None:
        self._ttl = ttl
        self._clock = clock
        self._records: dict[str, _Record] = {}

    def expect_creations(self, key: str, n: int) -> None:
        """Expect `n` creations for `key` (replacing any pending count); call before writing."""
        record = self._records.get(key)
        if record is None:
            record = self._records[key] = _Record(adds=0)
        record.adds = n
        record.since = self._clock()
        self._drop_if_fulfilled(key, record)

    def creation_observed(self, key: str) -> None:
        """One expected creation was seen by the informer (or its write failed)."""
        record = self._records.get(key)
        if record is None:
            return
        record.adds = max(0, record.adds - 1)
        self._drop_if_fulfilled(key, record)

    def expect_deletions(self, key: str, uids: Iterable[str]) -> None:
        """Expect these objects (by UID) to disappear (replacing pending UIDs)."""
        record = self._records.get(key)
        if record is None:
            record = self._records[key] = _Record(adds=0)
        record.uids = set(uids)
        record.since = self._clock()
        self._drop_if_fulfilled(key, record)

    def deletion_observed(self, key: str, uid: str) -> None:
        """The object with `uid` is gone (or its delete failed); other UIDs are ignored."""
        record = self._records.get(key)
        if record is None:
            return
        record.uids.discard(uid)
        self._drop_if_fulfilled(key, record)

    def satisfied(self, key: str) -> bool:
        """True when nothing is pending for `key`, or the pending record has expired."""
        record = self._records.get(key)
        if record is None or record.fulfilled:
            return True
        age = self._clock() - record.since
        if age > self._ttl:
            log.warning(
                "expectations_expired",
                key=key,
                adds=record.adds,
                deletions=len(record.uids),
                age_seconds=round(age, 1),
            )
            return True
        return False

    def pending(self, key: str) -> Pending:
        """What `key` still waits for."""
        record = self._records.get(key)
        if record is None:
            return Pending(adds=0, deletions=frozenset())
        return Pending(adds=record.adds, deletions=frozenset(record.uids))

    def delete(self, key: str) -> None:
        """Forget `key` entirely (its object is gone)."""
        self._records.pop(key, None)

    def __len__(self) -> int:
        """Keys with something pending."""
        return len(self._records)

    def _drop_if_fulfilled(self, key: str, record: _Record) -> None:
        if record.fulfilled:
            self._records.pop(key, None)
