"""Expectations against a lagging pod informer: the controller runs in-process here, with its
pod watch delayed on purpose, and must still create exactly one launcher pod per VMI."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path

import pytest

from controller.app import Controller
from controller.config import (
    Config,
    ContainerDiskDelivery,
    LeaderConfig,
    TemplateConfig,
    TimingConfig,
)
from localkube.cluster import Cluster
from shared.kube import (
    ClientConfig,
    Counter,
    KubeClient,
    ListResult,
    Registry,
    Source,
    WatchEvent,
)
from tests.integration.controller.harness import (
    SLEEPER_COMMAND,
    SLEEPER_IMAGE,
    create_vmi,
    free_port,
    launcher_pods,
    vmi_body,
    wait_phase,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

POD_EVENT_DELAY = 2.0


class DelayedSource:
    """A Source whose watch events arrive `delay` seconds late (lists are not delayed).

    Each event is held `delay` seconds from when the apiserver sent it, in order; events
    are not delayed one after another (a burst of ten would otherwise lag ten times `delay`)."""

    def __init__(self, inner: Source, delay: float) -> None:
        self._inner = inner
        self._delay = delay

    async def list(self) -> ListResult:
        return await self._inner.list()

    async def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AsyncGenerator[WatchEvent, None]:
        loop = asyncio.get_running_loop()
        held: asyncio.Queue[tuple[float, WatchEvent] | None] = asyncio.Queue()

        async def receive() -> None:
            stream = self._inner.watch(
                resource_version=resource_version, timeout_seconds=timeout_seconds
            )
            try:
                async with contextlib.aclosing(stream):
                    async for event in stream:
                        held.put_nowait((loop.time() + self._delay, event))
            finally:
                held.put_nowait(None)

        receiver = asyncio.create_task(receive(), name="delayed-watch")
        try:
            while (item := await held.get()) is not None:
                due, event = item
                await asyncio.sleep(max(0.0, due - loop.time()))
                yield event
            await receiver  # the inner watch's error, if it ended with one
        finally:
            receiver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await receiver


def delay_pods(name: str, source: Source) -> Source:
    return DelayedSource(source, POD_EVENT_DELAY) if name == "pods" else source


@pytest.fixture
async def in_process(kubevirt_cluster: Cluster, ns: str, tmp_path: Path) -> AsyncIterator[Registry]:
    """The controller's TaskGroup inside the test's loop; yields its metrics registry."""
    config = Config(
        kubeconfig=kubevirt_cluster.kubeconfig,
        namespace=ns,
        health_host="127.0.0.1",
        health_port=free_port(),
        template=TemplateConfig(
            launcher_image=SLEEPER_IMAGE,
            launcher_command=("sh", "-c", "exec python -m localkube.sleeper", "launcher"),
            notify_host_dir=str(tmp_path / "notify"),
            container_disk_delivery=ContainerDiskDelivery.COPY,  # process nodes: no image volumes
        ),
        timing=TimingConfig(vmi_unschedulable_timeout=60),
        leader=LeaderConfig(namespace=ns, identity="in-process", lease_seconds=6),
    )
    assert SLEEPER_COMMAND.startswith("sh -c")
    registry = Registry()
    client = await KubeClient.connect(ClientConfig(kubeconfig=config.kubeconfig), registry=registry)
    async with client:
        ctl = Controller(config, client, registry, wrap=delay_pods)
        task = asyncio.create_task(ctl.run(), name="controller-under-test")
        try:
            await asyncio.wait_for(ctl.elector.is_leader.wait(), 30)
            yield registry
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def pod_creates(registry: Registry) -> float:
    family = registry.get("kubevirt_rest_client_requests_total")
    assert isinstance(family, Counter)
    return sum(
        child.value
        for values, child in family.series()
        if values[3] == "pods" and values[4] == "create"
    )


async def test_lagging_pod_informer_still_yields_one_pod(
    kube: KubeClient, ns: str, in_process: Registry
) -> None:
    """Pod events arrive 2 s late: syncs in between wait on expectations, so the VMI gets
    exactly one create request, one pod, and reaches Scheduled (not Failed)."""
    vmis = [await create_vmi(kube, ns, vmi_body(f"lag{i}")) for i in range(3)]
    for vmi in vmis:
        await wait_phase(kube, ns, vmi.name, "Scheduled", timeout=120)
        assert len(await launcher_pods(kube, ns, vmi.uid)) == 1
    assert pod_creates(in_process) == len(vmis)
