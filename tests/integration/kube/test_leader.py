"""Leader election between two candidates on a real coordination.k8s.io/v1 Lease."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from shared.kube import LEASES, KubeClient, LeaderConfig, LeaderElector
from tests.integration.kube.conftest import KubeFactory
from tests.unit.shared.kube.fakes import eventually

pytestmark = pytest.mark.cluster


def candidate(kube: KubeClient, namespace: str, identity: str, **more: Any) -> LeaderElector:
    config = LeaderConfig(
        name="virt-controller",
        namespace=namespace,
        identity=identity,
        lease_duration=3.0,
        renew_deadline=2.0,
        retry_period=0.25,
        **more,
    )
    return LeaderElector(kube, config)


class Leading:
    """A lead() that records that it ran and then runs until cancelled."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


async def lease_spec(kube: KubeClient, namespace: str) -> dict[str, Any]:
    return dict((await kube.get(LEASES, "virt-controller", namespace=namespace))["spec"])


async def test_standby_takes_over_when_leader_releases(
    kube_factory: KubeFactory, namespace: str
) -> None:
    """Only one of two candidates leads; when the leader stops (and releases the Lease),
    the standby takes over without waiting for the lease to expire."""
    kube_a, kube_b = await kube_factory(), await kube_factory()
    a, b = candidate(kube_a, namespace, "a"), candidate(kube_b, namespace, "b")
    lead_a, lead_b = Leading(), Leading()
    async with asyncio.timeout(60), asyncio.TaskGroup() as tg:
        run_a = tg.create_task(a.run(lead_a))
        await lead_a.started.wait()
        run_b = tg.create_task(b.run(lead_b))
        await eventually(lambda: b.observed_holder == "a", real=True, limit=30)
        assert not lead_b.started.is_set()
        run_a.cancel()
        await lead_b.started.wait()
        assert lead_a.cancelled.is_set()
        spec = await lease_spec(kube_b, namespace)
        assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
        run_b.cancel()
    assert (await lease_spec(kube_a, namespace))["holderIdentity"] == ""


async def test_standby_takes_over_after_leader_dies(
    kube_factory: KubeFactory, namespace: str
) -> None:
    """A leader that vanishes without releasing (a crash) is replaced once its Lease has
    gone unrenewed for leaseDurationSeconds on the standby's clock."""
    kube_a, kube_b = await kube_factory(), await kube_factory()
    a = candidate(kube_a, namespace, "a", release_on_exit=False)
    b = candidate(kube_b, namespace, "b")
    lead_a, lead_b = Leading(), Leading()
    async with asyncio.timeout(60), asyncio.TaskGroup() as tg:
        run_a = tg.create_task(a.run(lead_a))
        await lead_a.started.wait()
        run_b = tg.create_task(b.run(lead_b))
        await eventually(lambda: b.observed_holder == "a", real=True, limit=30)
        run_a.cancel()  # dies: no more renewals, no release
        with contextlib.suppress(asyncio.CancelledError):
            await run_a
        assert (await lease_spec(kube_b, namespace))["holderIdentity"] == "a"
        await lead_b.started.wait()
        spec = await lease_spec(kube_b, namespace)
        assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
        run_b.cancel()
