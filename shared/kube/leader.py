"""Leader election on a coordination.k8s.io/v1 Lease (client-go's leaderelection, ported).

Two controller replicas are safe because only the holder of the Lease runs the loops:

    elector = LeaderElector(kube, LeaderConfig(name="virt-controller", namespace=ns,
                                               identity=pod_name))
    await elector.run(lead)   # campaigns; runs lead() only while leading

- Campaign: every `retry_period` (jittered) try to take the Lease; a Lease held by someone
  else counts as free once `leaseDurationSeconds` passed *on our clock* since we last saw
  its record change (no trust in the other node's wall clock).
- Lead: `lead()` runs in a TaskGroup next to the renew loop; each renew round retries every
  `retry_period` until `renew_deadline`. A round that fails means leadership is lost:
  `lead()` is cancelled, `is_leader` cleared, and `run` raises `LeadershipLost` (KubeVirt's
  controller exits here and is restarted; a caller may also campaign again).
- Release: when `lead()` returns or `run` is cancelled the Lease is released (holder
  emptied) so a standby takes over at once instead of after the lease duration
  (`release_on_exit=False` leaves it to expire instead).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Any, Protocol

import structlog

from shared.kube.errors import (
    ApiError,
    KubeError,
    NotFound,
    TransportError,
)
from shared.kube.ratelimit import MonotonicClock, Sleep
from shared.kube.resources import LEASES, Resource
from shared.model import Clock, utc_now
from shared.tasks import cancelling

log = structlog.get_logger("shared.kube.leader")

Lead = Callable[[], Coroutine[Any, Any, None]]


class LeadershipLost(KubeError):
    """The Lease could not be renewed within the renew deadline."""


class LeaseClient(Protocol):
    """The client calls the elector needs (KubeClient satisfies it)."""

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]: ...

    async def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]: ...

    async def update(self, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class LeaderConfig:
    """The Lease and the timing (client-go's defaults: 15 s / 10 s / 2 s)."""

    name: str
    namespace: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    jitter: float = 1.2  # campaign retries wait retry_period * (1 + jitter * rand)
    # Empty the holder when lead() ends or run() is cancelled, so a standby takes over at
    # once; False leaves the Lease to expire (as a crashed process would).
    release_on_exit: bool = True

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseRecord:
    """Lease.spec as the elector reads it."""

    holder: str
    duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> LeaseRecord:
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.duration_seconds,
            "leaseTransitions": self.transitions,
        }
        if self.acquire_time:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time:
            spec["renewTime"] = self.renew_time
        return spec


class LeaderElector:
    """Campaigns for, holds and releases one Lease; `is_leader` mirrors the state."""

    def __init__(
        self,
        client: LeaseClient,
        config: LeaderConfig,
        *,
        clock: Clock = utc_now,
        monotonic: MonotonicClock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._client = client
        self._config = config
        self._clock = clock
        self._monotonic = monotonic
        self._sleep = sleep
        self._rand = rand
        self.is_leader = asyncio.Event()
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._log = log.bind(lease=f"{config.namespace}/{config.name}", identity=config.identity)

    @property
    def observed_holder(self) -> str:
        """The holder in the last Lease record seen ("" when none)."""
        return self._observed.holder if self._observed else ""

    async def run(self, lead: Lead) -> None:
        """Campaign, then run `lead()` while leading; raises LeadershipLost on loss."""
        try:
            await self._campaign()
            async with asyncio.TaskGroup() as tg:
                work = tg.create_task(lead(), name=f"leader-{self._config.name}-lead")
                lost = await self._hold(work)
                if lost:
                    work.cancel()
            if lost:
                raise LeadershipLost(f"lost lease {self._config.namespace}/{self._config.name}")
        finally:
            await self._step_down()

    async def try_acquire_or_renew(self) -> bool:
        """One attempt to take or renew the Lease; True when we hold it afterwards."""
        try:
            lease = await self._get_lease()
        except NotFound:
            return await self._create()
        except (ApiError, TransportError) as e:
            self._log.warning("lease_get_failed", error=str(e))
            return False
        record = LeaseRecord.from_spec(lease.get("spec") or {})
        self._observe(record)
        me = self._config.identity
        if record.holder and record.holder != me and not self._expired(record):
            return False
        now = _micro_time(self._clock)
        new = LeaseRecord(
            holder=me,
            duration_seconds=self._duration_seconds(),
            acquire_time=record.acquire_time if record.holder == me else now,
            renew_time=now,
            transitions=record.transitions + (0 if record.holder == me else 1),
        )
        body = {**lease, "spec": {**(lease.get("spec") or {}), **new.to_spec()}}
        try:
            await self._client.update(LEASES, body)
        except (ApiError, TransportError) as e:
            self._log.info("lease_update_failed", error=str(e))
            return False
        self._observe(new)
        return True

    async def release(self) -> bool:
        """Empty the holder if we hold the Lease; True when released."""
        try:
            lease = await self._get_lease()
            record = LeaseRecord.from_spec(lease.get("spec") or {})
            if record.holder != self._config.identity:
                return False
            now = _micro_time(self._clock)
            released = LeaseRecord(
                holder="",
                duration_seconds=1,
                acquire_time=now,
                renew_time=now,
                transitions=record.transitions,
            )
            await self._client.update(LEASES, {**lease, "spec": released.to_spec()})
        except (ApiError, TransportError) as e:
            self._log.warning("lease_release_failed", error=str(e))
            return False
        self._observe(released)
        self._log.info("lease_released")
        return True

    # ---- phases -------------------------------------------------------------------------

    async def _campaign(self) -> None:
        self._log.info("leader_campaign_started")
        while not await self._attempt(self._config.renew_deadline):
            delay = self._config.retry_period * (1.0 + self._config.jitter * self._rand())
            await self._sleep(delay)
        self.is_leader.set()
        self._log.info("leader_elected")

    async def _hold(self, work: asyncio.Task[None]) -> bool:
        """Renew until `work` ends (False) or a renew round fails (True = lost)."""
        while not work.done():
            await asyncio.wait([work], timeout=self._config.retry_period)
            if work.done():
                return False
            if not await self._renew_round():
                self.is_leader.clear()
                self._log.warning("leader_lost")
                return True
        return False

    async def _renew_round(self) -> bool:
        deadline = self._monotonic() + self._config.renew_deadline
        while True:
            remaining = deadline - self._monotonic()
            if remaining <= 0:
                return False
            if await self._attempt(remaining):
                return True
            if self._monotonic() + self._config.retry_period >= deadline:
                return False
            await self._sleep(self._config.retry_period)

    async def _attempt(self, budget: float) -> bool:
        try:
            async with asyncio.timeout(budget):
                return await self.try_acquire_or_renew()
        except TimeoutError:
            if cancelling():
                raise
            return False

    async def _step_down(self) -> None:
        was_leader = self.is_leader.is_set()
        self.is_leader.clear()
        if not was_leader or not self._config.release_on_exit:
            return
        try:
            async with asyncio.timeout(self._config.retry_period):
                await self.release()
        except TimeoutError:
            self._log.warning("lease_release_timed_out")

    # ---- helpers ------------------------------------------------------------------------

    async def _get_lease(self) -> dict[str, Any]:
        return await self._client.get(LEASES, self._config.name, namespace=self._config.namespace)

    async def _create(self) -> bool:
        now = _micro_time(self._clock)
        record = LeaseRecord(
            holder=self._config.identity,
            duration_seconds=self._duration_seconds(),
            acquire_time=now,
            renew_time=now,
            transitions=0,
        )
        body = {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": self._config.name, "namespace": self._config.namespace},
            "spec": record.to_spec(),
        }
        try:
            await self._client.create(LEASES, body, namespace=self._config.namespace)
        except (ApiError, TransportError) as e:
            self._log.info("lease_create_failed", error=str(e))
            return False
        self._observe(record)
        return True

    def _observe(self, record: LeaseRecord) -> None:
        if record != self._observed:
            self._observed = record
            self._observed_at = self._monotonic()

    def _expired(self, record: LeaseRecord) -> bool:
        duration = record.duration_seconds or self._duration_seconds()
        return self._monotonic() >= self._observed_at + duration

    def _duration_seconds(self) -> int:
        return max(1, math.ceil(self._config.lease_duration))


def _micro_time(clock: Clock) -> str:
    """metav1.MicroTime: RFC 3339 with microseconds, UTC."""
    return clock().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
