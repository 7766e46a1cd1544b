"""Fakes behind the subresource API's Protocols, and builders for its inputs."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from shared.actions import ActionSpec
from shared.kube import NotFound, Registry
from shared.labels import HANDLER_ENDPOINT_ANNOTATION
from shared.model import VirtualMachineInstance
from virt_api.subresources.app import AppDeps
from virt_api.subresources.authn import RequestHeaderConfig, UserInfo
from virt_api.subresources.authz import Decision, ResourceAttributes
from virt_api.subresources.console import WebSocket
from virt_api.subresources.errors import SubresourceError, VmiRef
from virt_api.subresources.frontproxy import FrontProxy
from virt_api.subresources.locate import Target
from virt_api.subresources.vmactions import VmWrites

FRONT_PROXY_CN = "front-proxy-client"
PEER_HEADER = "X-Test-Peer-CN"  # the unit tests' stand-in for the TLS client certificate
PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def vmi(
    name: str = "vm1", namespace: str = "ns1", *, phase: str = "Running", node: str = "node01"
) -> VirtualMachineInstance:
    """A VMI with the status fields locating reads."""
    status: dict[str, Any] = {"phase": phase}
    if node:
        status["nodeName"] = node
    return VirtualMachineInstance.from_dict(
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachineInstance",
            "metadata": {"name": name, "namespace": namespace, "uid": "uid-1"},
            "spec": {},
            "status": status,
        }
    )


def node(name: str = "node01", endpoint: str | None = "https://10.0.0.5:8186") -> dict[str, Any]:
    annotations = {HANDLER_ENDPOINT_ANNOTATION: endpoint} if endpoint else {}
    return {"metadata": {"name": name, "annotations": annotations}}


@dataclass
class FakeReader:
    """VMIs and Nodes by key; missing ones raise shared.kube.NotFound like the client."""

    vmis: dict[tuple[str, str], VirtualMachineInstance] = field(default_factory=dict)
    nodes: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    async def get_vmi(self, namespace: str, name: str) -> VirtualMachineInstance:
        try:
            return self.vmis[(namespace, name)]
        except KeyError:
            raise NotFound(404, "NotFound", f"{namespace}/{name}") from None

    async def get_node(self, name: str) -> Mapping[str, Any]:
        try:
            return self.nodes[name]
        except KeyError:
            raise NotFound(404, "NotFound", name) from None


@dataclass
class FakeAuthorizer:
    """Allows what `allow` says; records every review."""

    allow: bool = True
    reason: str = ""
    reviews: list[tuple[UserInfo, ResourceAttributes]] = field(default_factory=list)

    async def authorize(self, user: UserInfo, attrs: ResourceAttributes) -> Decision:
        self.reviews.append((user, attrs))
        return Decision(self.allow, self.reason)


@dataclass
class FakeForwarder:
    """Answers `body` (or raises `error`); the console dials `console_url` if set."""

    body: bytes = b"{}"
    error: SubresourceError | None = None
    console_url: str = ""
    calls: list[tuple[Target, ActionSpec]] = field(default_factory=list)
    args: list[Mapping[str, Any] | None] = field(default_factory=list)
    consoles: list[Target] = field(default_factory=list)
    streams: list[tuple[Target, ActionSpec, str]] = field(default_factory=list)

    async def call(
        self, target: Target, spec: ActionSpec, *, args: Mapping[str, Any] | None = None
    ) -> bytes:
        self.calls.append((target, spec))
        self.args.append(args)
        if self.error is not None:
            raise self.error
        return self.body

    @contextlib.asynccontextmanager
    async def stream(
        self, target: Target, spec: ActionSpec, *, subpath: str = ""
    ) -> AsyncIterator[WebSocket]:
        self.consoles.append(target)
        self.streams.append((target, spec, subpath))
        if self.error is not None:
            raise self.error
        async with aiohttp.ClientSession() as session, session.ws_connect(self.console_url) as ws:
            yield ws


@dataclass
class FakeVmStore:
    """VMs (raw) and VMIs by key; records the writes it is asked to make."""

    vms: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    vmis: dict[tuple[str, str], VirtualMachineInstance] = field(default_factory=dict)
    applied: list[tuple[VmiRef, VmWrites]] = field(default_factory=list)

    async def get_vm(self, namespace: str, name: str) -> Mapping[str, Any]:
        try:
            return self.vms[(namespace, name)]
        except KeyError:
            raise NotFound(404, "NotFound", f"{namespace}/{name}") from None

    async def get_vmi(self, namespace: str, name: str) -> VirtualMachineInstance | None:
        return self.vmis.get((namespace, name))

    async def apply(self, ref: VmiRef, writes: VmWrites) -> None:
        self.applied.append((ref, writes))


def vm(
    name: str = "vm1", namespace: str = "ns1", *, strategy: str = "Always", **status: Any
) -> dict[str, Any]:
    """A VM as the API returns it."""
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": namespace, "uid": "vm-uid"},
        "spec": {"runStrategy": strategy, "template": {"spec": {}}},
        "status": status,
    }


def request_header_config(**changes: Any) -> RequestHeaderConfig:
    base: dict[str, Any] = {"client_ca": PEM, "allowed_names": (FRONT_PROXY_CN,)}
    return RequestHeaderConfig(**(base | changes))


def deps(
    *,
    reader: FakeReader | None = None,
    authorizer: FakeAuthorizer | None = None,
    forwarder: FakeForwarder | None = None,
    registry: Registry | None = None,
    vms: FakeVmStore | None = None,
) -> AppDeps:
    """App dependencies of fakes; the peer CN comes from the X-Test-Peer-CN header."""
    registry = registry or Registry()
    return AppDeps(
        front_proxy=FrontProxy(request_header_config()),
        authorizer=authorizer or FakeAuthorizer(),
        reader=reader or FakeReader(),
        forwarder=forwarder or FakeForwarder(),
        requests=registry.counter("kubevirt_subresource_requests_total", "t", ("action", "code")),
        vms=vms or FakeVmStore(),
        peer_name=lambda request: request.headers.get(PEER_HEADER),
        write_timeout=5.0,
        heartbeat=30.0,
    )


def proxied(user: str = "alice", *groups: str, **extra: str) -> list[tuple[str, str]]:
    """Headers of a request as kube-apiserver's front proxy sends it (groups repeat)."""
    headers = [(PEER_HEADER, FRONT_PROXY_CN), ("X-Remote-User", user)]
    headers += [("X-Remote-Group", group) for group in groups]
    headers += [(f"X-Remote-Extra-{key}", value) for key, value in extra.items()]
    return headers
