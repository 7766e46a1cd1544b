"""Fixtures for the subresource API on the real local cluster.

- ``stack`` (module): certificates from scripts/gen-certs, the subresource API and a
  handler actions endpoint served from this process (see stack.py for how kube-apiserver
  reaches them), the shipped APIService/Service/roles, a test namespace with VMIs and a
  Node for them; everything cluster-scoped is removed afterwards.
- ``kubectl``: runs the cluster's kubectl (admin, or another kubeconfig).
- ``apiserver``: an aiohttp session to kube-apiserver as the admin, for Status bodies and
  the console websocket.
- ``service_account``: a fresh ServiceAccount of the test namespace, with a kubeconfig
  holding its token.
"""

from __future__ import annotations

import asyncio
import base64
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
import yaml

from localkube.cluster import Cluster
from localkube.health import admin_ssl
from tests.integration.subresources.stack import Stack, StackConfig
from tests.unit.virt_api.subresources.certs import gen_certs

Kubectl = Callable[..., Awaitable["Ran"]]


@pytest.fixture(scope="module")
def stack(kube_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The whole path, up and Available for the module."""
    ip = kube_cluster.host_address
    suffix = uuid.uuid4().hex[:6]
    namespace = f"kvpy-subres-{suffix}"
    pki, _ = gen_certs(
        tmp_path_factory.mktemp("pki"), "--namespace", namespace, "--api-san", f"IP:{ip}"
    )
    workdir = Path(tempfile.mkdtemp(prefix="kvsr-"))  # short: holds a Unix socket
    stack = Stack(
        StackConfig(
            cluster=kube_cluster,
            pki=pki,
            namespace=namespace,
            node=f"kvpy-subres-node-{suffix}",
            host_ip=ip,
            workdir=workdir,
        )
    )
    try:
        stack.start(timeout=180.0)
        yield stack
    finally:
        stack.stop(timeout=60.0)
        shutil.rmtree(workdir, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class Ran:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def kubectl(stack: Stack) -> Kubectl:
    """`await kubectl(*args, kubeconfig=None, stdin=None)`: the admin unless told otherwise."""
    cluster = stack.config.cluster
    binary = cluster.config.bin_dir / "kubectl"

    async def run(*args: str, kubeconfig: Path | None = None, stdin: str | None = None) -> Ran:
        config = kubeconfig or cluster.kubeconfig
        proc = await asyncio.create_subprocess_exec(
            str(binary),
            f"--kubeconfig={config}",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            async with asyncio.timeout(60):
                out, err = await proc.communicate((stdin or "").encode())
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode is not None
        return Ran(proc.returncode, out.decode(), err.decode())

    return run


@pytest.fixture
async def apiserver(stack: Stack) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    """An admin session to kube-apiserver and its base URL."""
    cluster = stack.config.cluster
    connector = aiohttp.TCPConnector(ssl=admin_ssl(cluster.pki))
    async with aiohttp.ClientSession(connector=connector) as session:
        yield session, cluster.ports.server


@dataclass(frozen=True, slots=True)
class ServiceAccount:
    namespace: str
    name: str
    kubeconfig: Path

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"


@pytest.fixture
async def service_account(stack: Stack, kubectl: Kubectl, tmp_path: Path) -> ServiceAccount:
    """A ServiceAccount with no RBAC of its own, and a kubeconfig with its token."""
    ns, name = stack.config.namespace, f"sa-{uuid.uuid4().hex[:6]}"
    made = await kubectl("create", "serviceaccount", name, "-n", ns)
    assert made.code == 0, made.stderr
    token = await kubectl("create", "token", name, "-n", ns, "--duration=1h")
    assert token.code == 0, token.stderr
    cluster = stack.config.cluster
    ca = base64.b64encode(cluster.pki.crt("ca").read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "local",
                "cluster": {"server": cluster.ports.server, "certificate-authority-data": ca},
            }
        ],
        "users": [{"name": name, "user": {"token": token.stdout.strip()}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": name}}],
        "current-context": "sa",
    }
    path = tmp_path / "sa.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return ServiceAccount(ns, name, path)
