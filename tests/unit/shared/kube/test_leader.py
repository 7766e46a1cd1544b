"""Leader election on a Lease: acquire, renew, expiry on our own clock, release, loss."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from structlog.testing import capture_logs

from shared.kube.errors import ServerError
from shared.kube.leader import LeaderConfig, LeaderElector, LeadershipLost
from shared.kube.resources import LEASES
from tests.unit.shared.kube.fakes import FakeApi, FakeClock, eventually


def elector(
    api: FakeApi, identity: str, *, mono: FakeClock | None = None, **timing: Any
) -> LeaderElector:
    config = LeaderConfig(name="virt-controller", namespace="kubevirt", identity=identity, **timing)
    wall = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    if mono is None:
        return LeaderElector(api, config, clock=lambda: wall)
    return LeaderElector(api, config, clock=lambda: wall, monotonic=mono)


def fast(api: FakeApi, identity: str) -> LeaderElector:
    """An elector with short real-time periods for run() tests."""
    return elector(
        api, identity, lease_duration=2.0, renew_deadline=0.5, retry_period=0.02, jitter=0.0
    )


def spec(api: FakeApi) -> dict[str, Any]:
    return dict(api.stored(LEASES, "kubevirt/virt-controller")["spec"])


async def test_first_candidate_creates_the_lease() -> None:
    """With no Lease, the first attempt creates it with us as holder."""
    api = FakeApi()
    assert await elector(api, "a").try_acquire_or_renew()
    assert spec(api) == {
        "holderIdentity": "a",
        "leaseDurationSeconds": 15,
        "acquireTime": "2024-05-01T12:00:00.000000Z",
        "renewTime": "2024-05-01T12:00:00.000000Z",
        "leaseTransitions": 0,
    }


async def test_holder_renews_without_a_transition() -> None:
    """Renewing keeps acquireTime and the transition count."""
    api = FakeApi()
    a = elector(api, "a")
    assert await a.try_acquire_or_renew()
    rv = api.stored(LEASES, "kubevirt/virt-controller")["metadata"]["resourceVersion"]
    assert await a.try_acquire_or_renew()
    assert api.stored(LEASES, "kubevirt/virt-controller")["metadata"]["resourceVersion"] != rv
    assert spec(api)["leaseTransitions"] == 0


@pytest.mark.parametrize(
    ("elapsed", "acquired"),
    [
        pytest.param(14.0, False, id="held"),
        pytest.param(15.0, True, id="expired"),
    ],
)
async def test_lease_of_another_holder_expires_on_our_clock(elapsed: float, acquired: bool) -> None:
    """A foreign Lease whose record did not change for leaseDurationSeconds can be taken."""
    api = FakeApi()
    assert await elector(api, "a").try_acquire_or_renew()
    mono = FakeClock()
    b = elector(api, "b", mono=mono)
    assert not await b.try_acquire_or_renew()
    assert b.observed_holder == "a"
    mono.advance(elapsed)
    assert await b.try_acquire_or_renew() is acquired
    if acquired:
        assert spec(api)["holderIdentity"] == "b"
        assert spec(api)["leaseTransitions"] == 1


async def test_renewals_by_the_holder_keep_the_lease_alive() -> None:
    """Each renewal we observe restarts the expiry clock."""
    api = FakeApi()
    a = elector(api, "a")
    mono = FakeClock()
    b = elector(api, "b", mono=mono)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    for _ in range(3):
        mono.advance(10)
        api.stored(LEASES, "kubevirt/virt-controller")["spec"]["renewTime"] = f"t{mono.now}"
        assert not await b.try_acquire_or_renew()


async def test_released_lease_is_taken_at_once() -> None:
    """After release (holder emptied) another candidate acquires without waiting."""
    api = FakeApi()
    a, b = elector(api, "a"), elector(api, "b")
    assert await a.try_acquire_or_renew()
    assert await a.release()
    assert spec(api)["holderIdentity"] == ""
    assert await b.try_acquire_or_renew()
    assert not await a.release()  # not ours any more


async def test_api_failures_are_a_failed_attempt() -> None:
    """Errors from the API server make the attempt fail, not raise."""
    api = FakeApi()
    api.broken = ServerError(500, "InternalError", "etcd down")
    with capture_logs() as logs:
        assert not await elector(api, "a").try_acquire_or_renew()
    assert [e["event"] for e in logs] == ["lease_get_failed"]


async def test_conflicting_update_fails_the_attempt() -> None:
    """A concurrent writer (Conflict on update) means we did not get the Lease."""
    api = FakeApi()
    a = elector(api, "a")
    assert await a.try_acquire_or_renew()
    api.conflicts_before_write = 1
    assert not await a.try_acquire_or_renew()


async def test_run_leads_only_while_holding_and_releases_after() -> None:
    """lead() starts once elected, sees is_leader set, and the Lease is released after it."""
    api = FakeApi()
    a = fast(api, "a")
    seen: list[bool] = []

    async def lead() -> None:
        seen.append(a.is_leader.is_set())

    await a.run(lead)
    assert seen == [True]
    assert not a.is_leader.is_set()
    assert spec(api)["holderIdentity"] == ""


async def test_lost_renewal_cancels_lead_and_raises() -> None:
    """When renewals keep failing past the renew deadline, lead() is cancelled and
    LeadershipLost is raised."""
    api = FakeApi()
    a = fast(api, "a")
    cancelled = asyncio.Event()

    async def lead() -> None:
        api.broken = ServerError(500, "InternalError", "etcd down")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(LeadershipLost):
        await a.run(lead)
    assert cancelled.is_set()
    assert not a.is_leader.is_set()


async def test_cancelled_leader_releases_and_standby_takes_over() -> None:
    """Cancelling the leader's run releases the Lease; the standby becomes leader."""
    api = FakeApi()
    a, b = fast(api, "a"), fast(api, "b")
    b_led = asyncio.Event()

    async def lead_forever() -> None:
        await asyncio.Event().wait()

    async def lead_b() -> None:
        b_led.set()
        await asyncio.Event().wait()

    async with asyncio.TaskGroup() as tg:
        run_a = tg.create_task(a.run(lead_forever))
        await a.is_leader.wait()
        run_b = tg.create_task(b.run(lead_b))
        await eventually(lambda: b.observed_holder == "a", real=True)
        assert not b_led.is_set()
        run_a.cancel()
        await b_led.wait()
        assert spec(api)["holderIdentity"] == "b"
        assert spec(api)["leaseTransitions"] == 1
        run_b.cancel()
    assert spec(api)["holderIdentity"] == ""


async def test_leader_without_release_leaves_the_lease_to_expire() -> None:
    """With release_on_exit=False a cancelled leader keeps holding the Lease (as a crash)."""
    api = FakeApi()
    a = elector(
        api, "a", lease_duration=1.0, renew_deadline=0.2, retry_period=0.02, release_on_exit=False
    )

    async def lead() -> None:
        await asyncio.Event().wait()

    task = asyncio.create_task(a.run(lead))
    await a.is_leader.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not a.is_leader.is_set()
    assert spec(api)["holderIdentity"] == "a"


def test_timing_must_be_ordered() -> None:
    """lease_duration > renew_deadline > retry_period is enforced."""
    with pytest.raises(ValueError):
        LeaderConfig(name="l", namespace="n", identity="i", lease_duration=5, renew_deadline=10)
