"""Decentralized live migration with another cluster: both ends of the synchronization.

Receiving side (`SyncDesk`, behind sync_server.SyncServer): an offer is answered with
`decentral.pair` from this controller's caches, and the sender is remembered by
migrationID (its offer makes the receiving VMIM leave WaitingForSync; its report ends it).
Each message wakes the receiving VMIMs of its migrationID. The table lives in memory: a
receiving controller that restarts between the handoff and the sender's report leaves its
receiving VMIM waiting (docs/migration.md).

Sending side (`RemoteSending`): the offer through sync_client.RemotePeer; an endpoint that
cannot be reached `attempts` times in a row, or that refuses, refuses the pairing with a
reason naming the connectURL (the sending VMIM fails, the guest stays). A report that does
not get through is kept and sent again at the VMIM's next syncs (`resend`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from controller.migration.decentral import pair
from controller.migration.sync_client import RemotePeer, SyncRefused, SyncUnreachable
from controller.migration.sync_config import SyncConfig
from shared.model import VirtualMachineInstance, VirtualMachineInstanceMigration
from shared.wire.sync import (
    Ack,
    Answer,
    Pairing,
    PairingState,
    PeerOutcome,
    Report,
    Request,
    SourceHalf,
)

Migration = VirtualMachineInstanceMigration
log = structlog.get_logger("controller.migration.decentral")

# A sender that offered within this many seconds is synchronized (it offers every 5 s).
FRESH = 60.0
KEEP = 3600.0  # seconds a migrationID's entry is kept after its last message
ATTEMPTS = 3  # failed dials in a row before the sending VMIM fails
REPORT_ATTEMPTS = 12


@dataclass(slots=True)
class _Sender:
    seen: float
    source: SourceHalf | None = None
    outcome: tuple[PeerOutcome, str] | None = None


class SyncDesk:
    """The receiving side of the synchronization endpoint, answered from the caches."""

    def __init__(
        self,
        *,
        receivers: Callable[[str], Sequence[Migration]],
        vmis: Callable[[str], VirtualMachineInstance | None],
        wake: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._receivers = receivers
        self._vmis = vmis
        self._wake = wake
        self._clock = clock
        self._senders: dict[str, _Sender] = {}

    def answer(self, request: Request) -> Answer:
        """Pair an offer, or take a report; wakes the receiving VMIMs of its migrationID."""
        now = self._clock()
        self._prune(now)
        entry = self._senders.setdefault(request.migration_id, _Sender(seen=now))
        entry.seen = now
        if isinstance(request, Report):
            entry.outcome = (request.outcome, request.reason)
            log.info("decentral_remote_report", migration_id=request.migration_id,
                     outcome=str(request.outcome), reason=request.reason)  # fmt: skip
            self._wake(request.migration_id)
            return Ack()
        entry.source = request
        receivers = self._receivers(request.migration_id)
        pairing = pair(request, receivers=receivers, vmis=self._vmis, remote=True)
        log.info("decentral_remote_offer", migration_id=request.migration_id,
                 source=request.vmi_key, state=str(pairing.state))  # fmt: skip
        self._wake(request.migration_id)
        return pairing

    def _prune(self, now: float) -> None:
        for mid in [m for m, e in self._senders.items() if now - e.seen > KEEP]:
            del self._senders[mid]

    def synchronized(self, migration_id: str) -> bool:
        """A sender of another cluster offered lately (or already ended)."""
        entry = self._senders.get(migration_id)
        if entry is None or entry.source is None:
            return False
        return entry.outcome is not None or self._clock() - entry.seen <= FRESH

    def outcome(self, migration_id: str) -> tuple[PeerOutcome, str] | None:
        """How a sender of another cluster ended, once it reported."""
        entry = self._senders.get(migration_id)
        return entry.outcome if entry is not None else None


@dataclass(slots=True)
class _Unsent:
    url: str
    report: Report
    tries: int = 0


class RemoteSending:
    """The sending side's dials to other clusters, keyed by the sending VMIM."""

    def __init__(self, config: SyncConfig | None, *, attempts: int = ATTEMPTS) -> None:
        self._config = config
        self._attempts = attempts
        self._failures: dict[str, int] = {}
        self._answered: dict[str, PairingState] = {}  # the peer's last answer, by VMIM
        self._unsent: dict[str, _Unsent] = {}

    def _peer(self, url: str) -> RemotePeer | None:
        if self._config is None or not self._config.enabled:
            return None
        return RemotePeer(url, config=self._config)

    async def offer(self, key: str, url: str, source: SourceHalf) -> Pairing:
        """The receiving cluster's pairing, WAITING after a failed dial, REFUSED after
        `attempts` of them in a row or a refusal (naming the connectURL)."""
        peer = self._peer(url)
        log.debug("decentral_sync_offer", vmim=key, url=url)
        if peer is None:
            why = (
                f"connectURL {url} is another cluster's synchronization address, but this "
                "controller has no synchronization certificate (virt-synchronization-"
                "controller-certs)"
            )
            return Pairing(state=PairingState.REFUSED, reason=why)
        try:
            pairing = await peer.offer(source)
        except SyncRefused as exc:
            self._failures.pop(key, None)
            return Pairing(state=PairingState.REFUSED, reason=f"connectURL {url}: {exc}")
        except SyncUnreachable as exc:
            failures = self._failures.get(key, 0) + 1
            log.warning("decentral_sync_failed", vmim=key, url=url, why=exc.why, tries=failures)
            if failures < self._attempts:
                self._failures[key] = failures
                return Pairing(state=PairingState.WAITING, reason=str(exc))
            self._failures.pop(key, None)
            why = f"connectURL {url}: synchronization failed {failures} times: {exc.why}"
            return Pairing(state=PairingState.REFUSED, reason=why)
        self._failures.pop(key, None)
        if self._answered.get(key) != pairing.state:  # logged on change, not every poll
            self._answered[key] = pairing.state
            log.info("decentral_sync_answered", vmim=key, url=url, state=str(pairing.state),
                     reason=pairing.reason)  # fmt: skip
        return pairing

    async def report(self, key: str, url: str, report: Report) -> bool:
        """Tell the receiving cluster how the sending side ended; False: kept to resend.
        A failure of a VMIM whose offers the peer never answered (here) is told once, not
        kept: the peer may never have heard of it (an unreachable connectURL)."""
        self._failures.pop(key, None)
        answered = self._answered.pop(key, None) is not None
        tries = 0 if answered or report.outcome is PeerOutcome.SUCCEEDED else REPORT_ATTEMPTS - 1
        self._unsent[key] = _Unsent(url=url, report=report, tries=tries)
        return await self.resend(key)

    def pending(self, key: str) -> bool:
        """A report of this VMIM still waits to get through."""
        return key in self._unsent

    async def resend(self, key: str) -> bool:
        """Try the VMIM's unsent report again; True when none is left."""
        unsent = self._unsent.get(key)
        if unsent is None:
            return True
        peer = self._peer(unsent.url)
        if peer is None:
            del self._unsent[key]
            return True
        r = unsent.report
        try:
            await peer.report(r.migration_id, r.outcome, reason=r.reason)
        except (SyncUnreachable, SyncRefused) as exc:
            unsent.tries += 1
            log.warning("decentral_report_failed", vmim=key, url=unsent.url, why=str(exc),
                        tries=unsent.tries)  # fmt: skip
            if unsent.tries < REPORT_ATTEMPTS:
                return False
        del self._unsent[key]
        return True

    def forget(self, key: str) -> None:
        """The sending VMIM is gone."""
        self._failures.pop(key, None)
        self._answered.pop(key, None)
        self._unsent.pop(key, None)
