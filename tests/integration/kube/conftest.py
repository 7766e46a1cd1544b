"""Fixtures for shared.kube against the real local cluster.

- ``local_cluster``: the session's cluster (``kube_cluster``, registered suite-wide in
  tests/conftest.py).
- ``kube`` (test): a `KubeClient` with the admin kubeconfig; ``kube_factory`` makes more
  (separate connection pools, e.g. one per leader-election candidate).
- ``namespace`` (test): a fresh namespace, deleted afterwards.
- ``vmi_crds`` (test): the kubevirt.io/v1 CRDs generated from the model, installed once.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from localkube.cluster import Cluster
from localkube.testing import (
    dns_label,
    wait_for,
)
from shared.kube import AlreadyExists, ClientConfig, KubeClient, NotFound, Registry, Resource
from shared.kube.resources import VMIS
from shared.model.crd import KINDS, build_crd

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
KubeFactory = Callable[..., Awaitable[KubeClient]]


@pytest.fixture
def local_cluster(kube_cluster: Cluster) -> Cluster:
    """The session's cluster (tests/integration/cluster/fixtures.py, registered suite-wide)."""
    return kube_cluster


@pytest.fixture
async def kube_factory(local_cluster: Cluster) -> AsyncIterator[KubeFactory]:
    """Makes admin KubeClients (each with its own connection pool); closes them after."""
    clients: list[KubeClient] = []

    async def make(registry: Registry | None = None) -> KubeClient:
        client = await KubeClient.connect(
            ClientConfig(kubeconfig=local_cluster.kubeconfig), registry=registry or Registry()
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


@pytest.fixture
async def kube(kube_factory: KubeFactory) -> KubeClient:
    """An admin KubeClient."""
    return await kube_factory()


@pytest.fixture
async def namespace(kube: KubeClient, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A namespace for this test only (deletion is not awaited)."""
    name = f"{dns_label(request.node.name, max_len=40)}-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"metadata": {"name": name}})
    yield name
    with contextlib.suppress(NotFound):
        await kube.delete(NAMESPACES, name)


@pytest.fixture
async def vmi_crds(kube: KubeClient, namespace: str) -> None:
    """The kubevirt.io CRDs (as generated from the model) are installed and served."""
    for info in KINDS:
        with contextlib.suppress(AlreadyExists):
            await kube.create(CRDS, build_crd(info))
    await wait_for(
        lambda: kube.list(VMIS, namespace=namespace),
        lambda _: True,
        what="virtualmachineinstances served",
        timeout=60,
    )
