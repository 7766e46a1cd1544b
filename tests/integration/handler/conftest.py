"""Fixtures for handler integration tests: the real guest under real launchers.

`guest` (session) builds or reuses the test guest (from the launcher suite; fails loudly
when impossible). `node` runs the handler in-process, as a node of its own on the session
cluster, with real launchers; every launcher, libvirtd and QEMU it started is gone after
the test.

On the local cluster (`kube_cluster`, one per session, from tests/integration/cluster):
`node01` runs `python -m handler` for node01, `controller` the real controller for the
test's namespace, and `cluster_node` both, deleting the test's VMIs at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from localkube.cluster import Cluster
from localkube.testing import dns_label
from shared.kube import NODES, VMIS, ClientConfig, KubeClient, NotFound, Registry
from shared.labels import SCHEDULABLE_LABEL
from tests.integration.controller.harness import NAMESPACES, ControllerProcess
from tests.integration.controller.harness import install_crd_files as install_kubevirt_crds
from tests.integration.handler.cluster import (
    HandlerProcess,
    controller_args,
    install_crds,
    notify_root,
)
from tests.integration.handler.node import Node, new_root, on_cluster
from tests.integration.launcher.conftest import guest
from tests.unit.handler.waiting import until_async

__all__ = ["guest"]


# ---- on the local cluster ---------------------------------------------------------------


@pytest.fixture(scope="session")
def notify_dir() -> Iterator[Path]:
    """The session's stand-in for the nodes' /var/run/kubevirt-py; removed at the end."""
    root = notify_root()
    (root / "nodes").mkdir(parents=True, exist_ok=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def handler_cluster(kube_cluster: Cluster, notify_dir: Path) -> Cluster:
    """The session cluster with every CRD of manifests/base served (an earlier test that
    deployed and removed kubevirt-py took them away; the controller lists every kind)."""
    install_kubevirt_crds(kube_cluster)

    async def install() -> None:
        async with await KubeClient.connect(
            ClientConfig(kubeconfig=kube_cluster.kubeconfig), registry=Registry()
        ) as kube:
            await install_crds(kube)

    asyncio.run(install())
    return kube_cluster


@pytest.fixture
async def kube(handler_cluster: Cluster) -> AsyncIterator[KubeClient]:
    """The product's client facade, as cluster admin."""
    client = await KubeClient.connect(
        ClientConfig(kubeconfig=handler_cluster.kubeconfig, user_agent="handler-tests"),
        registry=Registry(),
    )
    async with client:
        yield client


@pytest.fixture
async def ns(kube: KubeClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A namespace for this test; deleted afterwards (not awaited)."""
    name = f"{dns_label(request.node.name, max_len=40)}-{uuid.uuid4().hex[:6]}"
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    with contextlib.suppress(NotFound):
        await kube.delete(NAMESPACES, name)


@pytest.fixture
async def node(guest: Path, kube: KubeClient, ns: str) -> AsyncIterator[Node]:
    """A handler-managed node of its own (handler started); torn down with nothing left."""
    async with on_cluster(Node(new_root(), kube=kube, namespace=ns)) as n:
        yield n


@pytest.fixture
async def node01(
    handler_cluster: Cluster, kube: KubeClient, tmp_path: Path
) -> AsyncIterator[HandlerProcess]:
    """virt-handler-py for node01 as a subprocess; node01's labels are restored afterwards."""
    root = notify_root()
    before = (await kube.get(NODES, "node01"))["metadata"].get("labels", {})
    handler = HandlerProcess(handler_cluster, "node01", root, tmp_path / "handler.log")
    await handler.start()
    yield handler
    await handler.stop()
    restore = {SCHEDULABLE_LABEL: before.get(SCHEDULABLE_LABEL)}
    await kube.patch(NODES, "node01", {"metadata": {"labels": restore}})


@pytest.fixture
async def controller(
    handler_cluster: Cluster, ns: str, tmp_path: Path
) -> AsyncIterator[ControllerProcess]:
    """The real controller for this test's namespace, rendering real launcher pods."""
    proc = ControllerProcess(
        handler_cluster, ns, tmp_path / "controller.log", extra=controller_args(notify_root())
    )
    await proc.start()
    yield proc
    await proc.stop()


@pytest.fixture
async def cluster_node(
    kube: KubeClient, ns: str, controller: ControllerProcess, node01: HandlerProcess
) -> AsyncIterator[HandlerProcess]:
    """Controller + node01's handler; every VMI of the test is deleted (and gone) after it."""
    yield node01
    for item in (await kube.list(VMIS, namespace=ns)).items:
        with contextlib.suppress(NotFound):
            await kube.delete(VMIS, item["metadata"]["name"], namespace=ns)

    async def all_gone() -> bool:
        return not (await kube.list(VMIS, namespace=ns)).items

    await until_async(all_gone, "the test's VMIs deleted", timeout=120)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    """Attach the handler's and controller's log tails to failed cluster tests."""
    report = yield
    funcargs = getattr(item, "funcargs", {})
    if call.when == "call" and getattr(report, "failed", False):
        for name in ("node01", "controller"):
            proc = funcargs.get(name)
            if isinstance(proc, HandlerProcess | ControllerProcess):
                report.sections.append((f"{name} log", proc.log_tail(80)))  # type: ignore[attr-defined]
    return report
