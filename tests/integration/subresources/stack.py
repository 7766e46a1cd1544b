"""The subresource path on the real local cluster, run in a thread for a whole test module.

    kubectl/aiohttp ─▶ kube-apiserver ─(aggregator, front-proxy cert)─▶ SubresourceServer
        ─(SubjectAccessReview)─▶ kube-apiserver
        ─(mTLS)─▶ ActionsServer ─▶ RecordingTarget (+ a fake serial console socket)

How kube-apiserver reaches a server in this process: the APIService names Service
`virt-api` in the test namespace: a ClusterIP Service without a selector plus a hand-made
EndpointSlice (label kubernetes.io/service-name, port name `https`) whose address is this
host's non-loopback IP. With --enable-aggregator-routing the aggregator dials that endpoint
directly (no kube-proxy needed) and verifies the certificate for virt-api.<ns>.svc.
Loopback cannot be used: EndpointSlice validation refuses 127.0.0.0/8, and ExternalName
Services are refused by the aggregator's endpoint routing.

The servers run on their own event loop in a thread so that the APIService stays
Available across tests (each test has its own loop); `RecordingTarget` is read from the
test thread (list appends are atomic).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
import yaml

from handler.actions import ActionsConfig, ActionsServer, NotOnThisNode
from localkube.cluster import Cluster
from localkube.testing import wait_for
from shared.kube import (
    NODES,
    VMIS,
    AlreadyExists,
    ClientConfig,
    KubeClient,
    KubeError,
    NotFound,
    Registry,
    Resource,
)
from shared.labels import HANDLER_ENDPOINT_ANNOTATION
from shared.model.crd import KINDS, build_crd
from shared.wire.errors import CommandFailed, ErrorCode
from shared.wire.launcher_api import Method
from tests.integration.loopthread import LoopThread
from tests.unit.virt_api.subresources.certs import Pki
from virt_api.subresources.authn import UserInfo
from virt_api.subresources.authz import Decision, ResourceAttributes, SarAuthorizer
from virt_api.subresources.config import SubresourceConfig
from virt_api.subresources.server import SubresourceServer
from virt_api.subresources.tls import CertDir

log = structlog.get_logger("tests.subresources.stack")

REPO = Path(__file__).resolve().parents[3]
MANIFESTS = REPO / "manifests" / "base" / "subresources"
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
SERVICES = Resource("", "v1", "services", "Service")
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
APISERVICES = Resource("apiregistration.k8s.io", "v1", "apiservices", "APIService", False)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
)
APISERVICE_NAME = "v1.subresources.kubevirt.io"
RUNNING_VMI = "vm1"
PENDING_VMI = "vm-pending"
NO_AGENT_VMI = "vm-noagent"
GUEST_INFO = {
    "guestAgentVersion": "5.2.0",
    "hostname": "tiny",
    "os": {"name": "Debian GNU/Linux", "version": "12 (bookworm)", "id": "debian"},
    "timezone": "UTC, 0",
}
CONSOLE_GREETING = b"KUBEVIRT-PY-GUEST-BOOTED\r\n"
VNC_GREETING = b"RFB 003.008\n"


@dataclass
class RecordingTarget:
    """The handler-side target: records commands; one VMI has no guest agent."""

    console: Path
    commands: list[tuple[str, str, Method]] = field(default_factory=list)
    guest_port: int | None = None
    forwarded: list[int] = field(default_factory=list)
    args: list[Mapping[str, Any] | None] = field(default_factory=list)

    async def command(
        self, namespace: str, name: str, method: Method, args: Mapping[str, Any] | None = None
    ) -> Any:
        self.commands.append((namespace, name, method))
        self.args.append(args)
        if name == NO_AGENT_VMI:
            raise CommandFailed(ErrorCode.AGENT_NOT_CONNECTED, "the guest agent is not connected")
        if method is Method.GET_GUEST_INFO:
            return GUEST_INFO
        return {"name": name, "state": "Paused" if method is Method.PAUSE else "Running"}

    async def console_socket(self, namespace: str, name: str) -> Path:
        return self.console

    async def vnc_socket(self, namespace: str, name: str) -> Path:
        return self.console.with_name("vnc.sock")

    async def forward_port(self, namespace: str, name: str, port: int) -> tuple[str, int]:
        """Every guest port is the stand-in console server's TCP twin (greets, upper-cases)."""
        if self.guest_port is None:
            raise NotOnThisNode(f"{namespace}/{name}: no guest network in this stack")
        self.forwarded.append(port)
        return "127.0.0.1", self.guest_port


@dataclass
class RecordingAuthorizer:
    """The real SubjectAccessReview, with every review and decision recorded."""

    inner: SarAuthorizer
    reviews: list[tuple[UserInfo, ResourceAttributes, Decision]] = field(default_factory=list)

    async def authorize(self, user: UserInfo, attrs: ResourceAttributes) -> Decision:
        decision = await self.inner.authorize(user, attrs)
        self.reviews.append((user, attrs, decision))
        return decision


@dataclass(frozen=True, slots=True, kw_only=True)
class StackConfig:
    cluster: Cluster
    pki: Pki
    namespace: str
    node: str  # a Node object made for the test: its handler is our ActionsServer
    host_ip: str
    workdir: Path


class Stack(LoopThread):
    """Starts in a thread; `start()` returns once the APIService is Available."""

    def __init__(self, config: StackConfig) -> None:
        super().__init__(what="subresource stack")
        self.config = config
        self.target = RecordingTarget(console=config.workdir / "console.sock")
        self.authorizer: RecordingAuthorizer | None = None
        self.api_port: int | None = None

    async def serve(self, stop: asyncio.Event) -> None:
        cfg = self.config
        client = await KubeClient.connect(
            ClientConfig(kubeconfig=cfg.cluster.kubeconfig), registry=Registry()
        )
        async with (
            client,
            _console_server(self.target.console),
            _console_server(self.target.console.with_name("vnc.sock"), greeting=VNC_GREETING),
            _tcp_server() as tcp,
        ):
            self.target.guest_port = tcp.sockets[0].getsockname()[1]
            try:
                await _install_crds(client)
                await _apply_roles(client)
                await client.create(NAMESPACES, {"metadata": {"name": cfg.namespace}})
                await self._serve(client, stop)
            finally:
                await _cleanup(client, cfg)

    async def _serve(self, client: KubeClient, stop: asyncio.Event) -> None:
        cfg = self.config
        actions = ActionsServer(
            ActionsConfig(cert_dir=cfg.pki.handler, host="127.0.0.1", port=0), self.target
        )
        self.authorizer = RecordingAuthorizer(SarAuthorizer(client))
        api = SubresourceServer(
            SubresourceConfig(
                serving=CertDir(cfg.pki.api),
                handler_client=CertDir(cfg.pki.controller),
                host=cfg.host_ip,
                port=0,
                handler_server_name=f"virt-handler.{cfg.namespace}.svc",
            ),
            client,
            Registry(),
            authorizer=self.authorizer,
        )
        async with asyncio.TaskGroup() as tg:
            tg.create_task(actions.run(stop), name="actions")
            tg.create_task(api.run(stop), name="subresources")
            await actions.started.wait()
            await api.started.wait()
            assert actions.url is not None and api.bound_port is not None
            self.api_port = api.bound_port
            await _register(client, cfg, handler_url=actions.url, api_port=api.bound_port)
            log.info("subresource_stack_ready", api_port=api.bound_port, handler=actions.url)
            self.ready()


async def _greet_and_shout(
    greeting: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    writer.write(greeting)
    while data := await reader.read(4096):
        writer.write(data.upper())
        await writer.drain()
    writer.close()


@contextlib.asynccontextmanager
async def _console_server(
    path: Path, *, greeting: bytes = CONSOLE_GREETING
) -> AsyncIterator[asyncio.Server]:
    """A stand-in serial console (or VNC server): greets, then echoes upper-cased."""
    server = await asyncio.start_unix_server(functools.partial(_greet_and_shout, greeting), path)
    async with server:
        yield server


@contextlib.asynccontextmanager
async def _tcp_server() -> AsyncIterator[asyncio.Server]:
    """A stand-in guest port on loopback: greets like the console, echoes upper-cased."""
    serve = functools.partial(_greet_and_shout, CONSOLE_GREETING)
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    async with server:
        yield server


async def _install_crds(client: KubeClient) -> None:
    for info in KINDS:
        with contextlib.suppress(AlreadyExists):
            await client.create(CRDS, build_crd(info))
    await wait_for(
        lambda: client.list(VMIS, namespace="default"),
        lambda _: True,
        what="virtualmachineinstances served",
        timeout=60,
    )


def manifest_docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


async def _apply_roles(client: KubeClient) -> None:
    """The user-facing ClusterRoles (and the default binding) exactly as shipped."""
    for doc in manifest_docs("rbac-users.yaml"):
        resource = CLUSTER_ROLES if doc["kind"] == "ClusterRole" else CLUSTER_ROLE_BINDINGS
        with contextlib.suppress(NotFound):
            await client.delete(resource, doc["metadata"]["name"])
        await client.create(resource, doc)


async def _register(
    client: KubeClient, cfg: StackConfig, *, handler_url: str, api_port: int
) -> None:
    """Node + VMIs, then Service + EndpointSlice + APIService; wait until Available."""
    ns = cfg.namespace
    node = {
        "metadata": {"name": cfg.node, "annotations": {HANDLER_ENDPOINT_ANNOTATION: handler_url}}
    }
    await client.create(NODES, node)
    for name in (RUNNING_VMI, PENDING_VMI, NO_AGENT_VMI):
        await _create_vmi(client, ns, name, running_on=None if name == PENDING_VMI else cfg.node)
    (service,) = manifest_docs("service.yaml")
    service["metadata"]["namespace"] = ns
    del service["spec"]["selector"]  # endpoints are ours, not a Deployment's
    service["spec"]["ports"][0]["targetPort"] = api_port
    await client.create(SERVICES, service)
    await client.create(ENDPOINT_SLICES, _endpoint_slice(ns, cfg.host_ip, api_port))
    (apiservice,) = manifest_docs("apiservice.yaml")
    apiservice["spec"]["service"]["namespace"] = ns
    apiservice["spec"]["caBundle"] = _ca_bundle(cfg.pki)
    with contextlib.suppress(NotFound):
        await client.delete(APISERVICES, APISERVICE_NAME)
    await client.create(APISERVICES, apiservice)
    await wait_for(
        lambda: client.get(APISERVICES, APISERVICE_NAME),
        _available,
        what="APIService v1.subresources.kubevirt.io Available",
        timeout=90,
        show=lambda a: a.get("status"),
    )


async def _create_vmi(client: KubeClient, ns: str, name: str, *, running_on: str | None) -> None:
    body = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    body["metadata"] = {"name": name, "namespace": ns}
    created = await client.create(VMIS, body)
    if running_on is not None:
        created["status"] = {"phase": "Running", "nodeName": running_on}
        await client.update_status(VMIS, created)


def _endpoint_slice(ns: str, ip: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "virt-api-in-test-process",
            "namespace": ns,
            "labels": {"kubernetes.io/service-name": "virt-api"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
    }


def _ca_bundle(pki: Pki) -> str:
    return base64.b64encode(pki.ca[0].read_bytes()).decode()


def _available(apiservice: Mapping[str, Any]) -> bool:
    conditions = (apiservice.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)


async def _cleanup(client: KubeClient, cfg: StackConfig) -> None:
    """Everything cluster-scoped goes; the namespace takes its objects along."""
    deletions = [
        (APISERVICES, APISERVICE_NAME, None),
        (NODES, cfg.node, None),
        (NAMESPACES, cfg.namespace, None),
        *[
            (
                CLUSTER_ROLES if d["kind"] == "ClusterRole" else CLUSTER_ROLE_BINDINGS,
                d["metadata"]["name"],
                None,
            )
            for d in manifest_docs("rbac-users.yaml")
        ],
    ]
    for resource, name, namespace in deletions:
        with contextlib.suppress(KubeError):
            await client.delete(resource, name, namespace=namespace)
