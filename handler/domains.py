"""The domain cache: what each launcher last said about its domain, keyed by VMI uid.

Fed by pushed domain events (the notify server) and by command replies. A reply is a
snapshot taken while the call ran, so it may be older than an event that arrived
meanwhile: replies carry the cache generation seen before the call and are dropped when
an event came in since. Every change is announced with the VMI's key so the reconcile
loop revisits it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from shared.wire.domain import DomainEvent, DomainState, DomainStatus, EventType

log = structlog.get_logger("handler.domains")

OnChange = Callable[[str], None]
OFF_STATES = frozenset({DomainState.SHUTOFF, DomainState.CRASHED})


@dataclass(frozen=True, slots=True, kw_only=True)
class DomainRecord:
    """The latest known state of one domain."""

    status: DomainStatus
    source: str  # the libvirt event name, or "reply"
    deleted: bool = False

    @property
    def key(self) -> str:
        return f"{self.status.namespace}/{self.status.vmi_name}"

    @property
    def is_off(self) -> bool:
        return self.deleted or self.status.state in OFF_STATES


class DomainCache:
    """Domain records by VMI uid; not thread-safe, only touched on the event loop."""

    def __init__(self, *, on_change: OnChange) -> None:
        self._records: dict[str, DomainRecord] = {}
        self._generations: dict[str, int] = {}
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._on_change = on_change
        self.events = 0

    def get(self, uid: str) -> DomainRecord | None:
        return self._records.get(uid)

    def generation(self, uid: str) -> int:
        """Bumped by every pushed event for this uid (see `apply_reply`)."""
        return self._generations.get(uid, 0)

    def next_state_change(self, uid: str) -> asyncio.Future[None]:
        """Done when a pushed event changes the state of `uid`'s domain (paused, shut off,
        gone...; cancel it to stop waiting): lets a launcher call that may hang (the guest
        agent of a guest just paused) give way to what the event says."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._waiters.setdefault(uid, set())
        waiters.add(waiter)
        waiter.add_done_callback(lambda w: self._unwait(uid, w))
        return waiter

    def _unwait(self, uid: str, waiter: asyncio.Future[None]) -> None:
        waiters = self._waiters.get(uid)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self._waiters[uid]

    def apply_event(self, event: DomainEvent) -> None:
        """Record a pushed event and announce the VMI."""
        uid = event.domain.vmi_uid
        self.events += 1
        self._generations[uid] = self.generation(uid) + 1
        old = self._records.get(uid)
        if old is None or old.status.state != event.domain.state or event.type is EventType.DELETED:
            for waiter in list(self._waiters.get(uid, ())):
                if not waiter.done():
                    waiter.set_result(None)
        record = DomainRecord(
            status=event.domain, source=event.reason, deleted=event.type is EventType.DELETED
        )
        self._store(uid, record)

    def apply_reply(self, status: DomainStatus, *, since: int) -> bool:
        """Record a command's reply unless an event arrived after generation `since`."""
        uid = status.vmi_uid
        if self.generation(uid) != since:
            return False
        self._store(uid, DomainRecord(status=status, source="reply"))
        return True

    def mark_missing(self, *, uid: str, namespace: str, name: str) -> None:
        """The launcher answered that it has no domain: record it as deleted."""
        status = DomainStatus(
            name=f"{namespace}_{name}",
            namespace=namespace,
            vmi_name=name,
            vmi_uid=uid,
            state=DomainState.SHUTOFF,
            reason="NotFound",
        )
        self._store(uid, DomainRecord(status=status, source="reply", deleted=True))

    def forget(self, uid: str) -> None:
        """Drop a VMI's record (the VMI is gone)."""
        self._records.pop(uid, None)
        self._generations.pop(uid, None)

    def forget_key(self, key: str) -> None:
        """Drop the records of the VMI at `key` "namespace/name" (it is gone; an event its
        launcher sent late recreated a record no VMI will forget)."""
        for uid in [uid for uid, record in self._records.items() if record.key == key]:
            self.forget(uid)

    def __len__(self) -> int:
        return len(self._records)

    def _store(self, uid: str, record: DomainRecord) -> None:
        old = self._records.get(uid)
        self._records[uid] = record
        if old is None or old.status != record.status or old.deleted != record.deleted:
            log.debug(
                "domain_changed",
                vmi=record.key,
                state=str(record.status.state),
                reason=record.status.reason,
                source=record.source,
            )
            self._on_change(record.key)
