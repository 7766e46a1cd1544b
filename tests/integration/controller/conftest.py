"""Fixtures for controller tests: the session cluster with kubevirt-py's CRDs installed, a
namespace per test, the product's KubeClient as admin, and a controller subprocess scoped
to the test's namespace.

The cluster is the session's `kube_cluster` (tests/integration/cluster/fixtures.py,
registered for the whole suite in tests/conftest.py): one cluster per pytest session. No
handler runs here, so every test runs virt-handler's device plugins for the nodes
(`device_plugins`), as the nodes' handlers would.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from localkube.cluster import Cluster
from localkube.testing import dns_label
from shared.kube import ClientConfig, KubeClient, Registry
from tests.integration.cluster.deviceplugins import node_device_plugins
from tests.integration.controller.harness import (
    NAMESPACES,
    ControllerProcess,
    install_kubevirt,
    release_finalizers,
    set_schedulable,
    without_handlers,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture(scope="session")
def kubevirt_cluster(kube_cluster: Cluster) -> Iterator[Cluster]:
    """The session cluster with the kubevirt.io CRDs installed and schedulable nodes (the
    node labels are put back as they were afterwards, for suites that run handlers)."""
    before = install_kubevirt(kube_cluster)
    yield kube_cluster
    for node, value in before.items():
        set_schedulable(kube_cluster, node, value)


@pytest.fixture
async def kube(kubevirt_cluster: Cluster) -> AsyncIterator[KubeClient]:
    """The product's client facade, as cluster admin."""
    client = await KubeClient.connect(
        ClientConfig(kubeconfig=kubevirt_cluster.kubeconfig, user_agent="controller-tests"),
        registry=Registry(),
    )
    async with client:
        yield client


@pytest.fixture(autouse=True)
async def device_plugins(kubevirt_cluster: Cluster, kube: KubeClient) -> AsyncIterator[None]:
    """No handler runs in these tests, so the suite runs virt-handler's device plugins on
    every node itself: launcher pods (requesting devices.kubevirt.io/tun) can be scheduled."""
    async with node_device_plugins(kubevirt_cluster, kube):
        yield


@pytest.fixture
async def ns(kube: KubeClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A namespace for this test; deleted afterwards (not awaited). The test's controller
    is gone by then, so the finalizers it would have dropped are dropped here."""
    name = f"{dns_label(request.node.name, max_len=40)}-{uuid.uuid4().hex[:6]}"
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    await release_finalizers(kube, name)
    await kube.delete(NAMESPACES, name)


@pytest.fixture
def controller_args() -> list[str]:
    """Extra controller flags; override in a test module for other timeouts or limits."""
    return ["--unschedulable-timeout", "15", "--heartbeat-timeout", "20"]


@pytest.fixture
async def controller(
    kubevirt_cluster: Cluster, ns: str, tmp_path: Path, controller_args: list[str]
) -> AsyncIterator[ControllerProcess]:
    """A running controller for this test's namespace, on nodes no handler heartbeats;
    its log is shown when a test fails."""
    without_handlers(kubevirt_cluster)
    proc = ControllerProcess(
        kubevirt_cluster, ns, tmp_path / "controller.log", extra=controller_args
    )
    await proc.start()
    yield proc
    await proc.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """Attach the controller's log tail to failed tests."""
    report = yield
    funcargs = getattr(item, "funcargs", {})
    proc = funcargs.get("controller")
    if (
        call.when == "call"
        and getattr(report, "failed", False)
        and isinstance(proc, ControllerProcess)
    ):
        report.sections.append(("controller log", proc.log_tail(80)))  # type: ignore[attr-defined]
    return report
