"""Both TLS hops with gen-certs' certificates: front proxy → subresource API → handler.

In-process servers on 127.0.0.1 with the real TLS contexts: the handler accepts only the
controller's certificate, the controller verifies the handler as virt-handler.kubevirt.svc
whatever IP it dials, and the subresource API believes X-Remote-* headers only from a
certificate of the front proxy's CA.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from handler.actions import ActionsConfig, ActionsServer, node_publisher
from shared.actions import ACTIONS, Action
from shared.kube import NODES, VMIS, ListResult, NotFound, Registry, Resource
from shared.labels import HANDLER_ENDPOINT_ANNOTATION
from shared.wire.launcher_api import Method
from tests.unit.handler.test_actions import FakeTarget
from tests.unit.virt_api.subresources.certs import (
    HANDLER_SERVER_NAME,
    Pki,
    client_cert,
    foreign_ca,
    gen_certs,
)
from tests.unit.virt_api.subresources.fakes import vmi
from virt_api.subresources.authz import SUBJECT_ACCESS_REVIEWS
from virt_api.subresources.config import SubresourceConfig
from virt_api.subresources.errors import BadGateway, VmiRef
from virt_api.subresources.forward import ForwardOptions, HandlerForwarder
from virt_api.subresources.frontproxy import CONFIGMAPS
from virt_api.subresources.locate import Target
from virt_api.subresources.server import SubresourceServer
from virt_api.subresources.tls import CertDir, handler_client_context, serving_context

BASE = "/apis/subresources.kubevirt.io/v1"
VMI_PATH = f"{BASE}/namespaces/ns1/virtualmachineinstances/vm1"
REF = VmiRef(namespace="ns1", name="vm1")


@dataclass(frozen=True, slots=True)
class Certs:
    pki: Pki
    front_proxy_ca: Path
    front_proxy_client: Path  # CN front-proxy-client, signed by the front proxy's CA
    intruder: Path  # CN intruder, signed by the kubevirt-py CA
    stranger: Path  # CN kubevirt-py-controller, signed by a foreign CA


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """gen-certs' set, a front-proxy CA with its client, and two certificates to refuse."""
    root = tmp_path_factory.mktemp("pki")
    pki, _ = gen_certs(root / "kv")
    fp_ca = foreign_ca(root / "front-proxy")
    return Certs(
        pki=pki,
        front_proxy_ca=fp_ca[0],
        front_proxy_client=client_cert(root / "fp", cn="front-proxy-client", ca=fp_ca),
        intruder=client_cert(root / "x", cn="intruder", ca=pki.ca),
        stranger=client_cert(
            root / "y", cn="kubevirt-py-controller", ca=foreign_ca(root / "other")
        ),
    )


@pytest.fixture
async def handler(certs: Certs) -> AsyncIterator[tuple[ActionsServer, FakeTarget, list[str]]]:
    """The real ActionsServer (mTLS) on 127.0.0.1 with a fake target; the endpoint it
    publishes on its Node (the annotation of the merge patch) goes to a list."""
    target = FakeTarget(results={Method.PAUSE: {"state": "Paused"}})
    published: list[str] = []

    async def patch_node(node: str, patch: Mapping[str, Any]) -> None:
        assert node == "node01"
        published.append(patch["metadata"]["annotations"][HANDLER_ENDPOINT_ANNOTATION])

    config = ActionsConfig(cert_dir=certs.pki.handler, host="127.0.0.1", port=0)
    server = ActionsServer(config, target, publish=node_publisher(patch_node, "node01"))
    stop = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        tg.create_task(server.run(stop))
        await server.started.wait()
        await server.published.wait()
        yield server, target, published
        stop.set()


async def forward_pause(
    url: str, client_dir: Path, *, server_name: str = HANDLER_SERVER_NAME
) -> bytes:
    """The controller's forwarder calling pause on the handler at `url`."""
    async with aiohttp.ClientSession() as session:
        forwarder = HandlerForwarder(
            session,
            tls=handler_client_context(CertDir(client_dir)),
            options=ForwardOptions(server_name=server_name, timeout=10.0),
        )
        target = Target(vmi=REF, node="node01", endpoint=url)
        return await forwarder.call(target, ACTIONS[Action.PAUSE])


async def test_controller_certificate_reaches_the_target(
    certs: Certs, handler: tuple[ActionsServer, FakeTarget, list[str]]
) -> None:
    """The controller's client certificate gets through; the endpoint was published."""
    server, target, published = handler
    assert published == [server.url]
    assert server.url is not None and server.url.startswith("https://127.0.0.1:")
    body = await forward_pause(server.url, certs.pki.controller)
    assert body == b'{"state": "Paused"}'
    assert target.commands == [("ns1", "vm1", Method.PAUSE)]


@pytest.mark.parametrize(
    ("client", "server_name", "reason"),
    [
        pytest.param("intruder", HANDLER_SERVER_NAME, "forbidden", id="our-ca-wrong-cn"),
        pytest.param("stranger", HANDLER_SERVER_NAME, "handler_unreachable", id="foreign-ca"),
        # The handler certificate is also a client certificate (the migration proxy's
        # handlers present it to each other), but not the controller's: 403.
        pytest.param("handler", HANDLER_SERVER_NAME, "forbidden", id="handler-cert"),
        pytest.param("controller", "virt-api.kubevirt.svc", "handler_unreachable", id="wrong-name"),
    ],
)
async def test_refused_connections(
    certs: Certs,
    handler: tuple[ActionsServer, FakeTarget, list[str]],
    client: str,
    server_name: str,
    reason: str,
) -> None:
    """Another CN of our CA (a handler's included) gets 403; a foreign CA fails the
    handshake; the controller refuses a handler certificate not valid for the expected name."""
    server, target, _ = handler
    assert server.url is not None
    known = {"controller": certs.pki.controller, "handler": certs.pki.handler}
    client_dir = known.get(client) or getattr(certs, client)
    with pytest.raises(BadGateway) as info:
        await forward_pause(server.url, client_dir, server_name=server_name)
    assert info.value.causes[0].reason == reason
    assert target.commands == []


@dataclass
class FakeKube:
    """The API reads and the SAR create SubresourceServer makes."""

    front_proxy_ca: str
    endpoint: str
    reviews: list[Mapping[str, Any]] = field(default_factory=list)

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        if resource == CONFIGMAPS:
            names = '["front-proxy-client"]'
            data = {"requestheader-client-ca-file": self.front_proxy_ca}
            return {"data": data | {"requestheader-allowed-names": names}}
        if resource == VMIS:
            return vmi().to_dict()
        if resource == NODES:
            return {"metadata": {"annotations": {HANDLER_ENDPOINT_ANNOTATION: self.endpoint}}}
        raise NotFound(404, "NotFound", name)

    async def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        assert resource == SUBJECT_ACCESS_REVIEWS
        self.reviews.append(body)
        return {"status": {"allowed": True}}

    async def patch(self, resource: Resource, name: str, patch: Any, **_: Any) -> dict[str, Any]:
        raise AssertionError("the VM verbs are not called here")

    async def list(self, resource: Resource, **_: Any) -> ListResult:
        raise AssertionError("the VM verbs are not called here")

    async def delete(self, resource: Resource, name: str, **_: Any) -> dict[str, Any]:
        raise AssertionError("the VM verbs are not called here")


def front_proxy_tls(certs: Certs, client: Path | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=certs.pki.ca[0])
    if client is not None:
        ctx.load_cert_chain(client / "tls.crt", client / "tls.key")
    return ctx


async def test_subresource_api_end_to_end(
    certs: Certs, handler: tuple[ActionsServer, FakeTarget, list[str]]
) -> None:
    """The front proxy's certificate + headers: reviewed, forwarded over mTLS, answered;
    without a certificate only /healthz answers; a certificate of another CA fails TLS."""
    server, target, _ = handler
    assert server.url is not None
    kube = FakeKube(certs.front_proxy_ca.read_text(), server.url)
    config = SubresourceConfig(
        serving=CertDir(certs.pki.api),
        handler_client=CertDir(certs.pki.controller),
        host="127.0.0.1",
        port=0,
    )
    api = SubresourceServer(config, kube, Registry())
    stop = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        tg.create_task(api.run(stop))
        await api.started.wait()
        url = f"https://127.0.0.1:{api.bound_port}"
        headers = {"X-Remote-User": "alice", "X-Remote-Group": "system:authenticated"}
        async with aiohttp.ClientSession() as s:
            proxy = front_proxy_tls(certs, certs.front_proxy_client)
            async with s.put(f"{url}{VMI_PATH}/pause", ssl=proxy, headers=headers) as resp:
                assert resp.status == 200
            bare = front_proxy_tls(certs, None)
            async with s.get(f"{url}/healthz", ssl=bare) as resp:
                assert resp.status == 200
            async with s.put(f"{url}{VMI_PATH}/pause", ssl=bare, headers=headers) as resp:
                assert resp.status == 401
            with pytest.raises(aiohttp.ClientError):
                await s.get(f"{url}/apis", ssl=front_proxy_tls(certs, certs.stranger))
        stop.set()
    assert target.commands == [("ns1", "vm1", Method.PAUSE)]
    assert [r["spec"]["user"] for r in kube.reviews] == ["alice"]


def test_contexts_trust_only_the_given_ca(certs: Certs) -> None:
    """No system CA is trusted anywhere: only the front proxy's CA (serving) and the
    kubevirt-py CA (handler client and handler server)."""
    pem = certs.front_proxy_ca.read_text()
    serving = serving_context(CertDir(certs.pki.api), client_ca_pem=pem)
    handler_server = ActionsConfig(cert_dir=certs.pki.handler).server_context()
    client = handler_client_context(CertDir(certs.pki.controller))
    for ctx in (serving, handler_server, client):
        assert len(ctx.get_ca_certs()) == 1
    assert serving.verify_mode is ssl.CERT_OPTIONAL
    assert handler_server.verify_mode is ssl.CERT_REQUIRED
    assert client.verify_mode is ssl.CERT_REQUIRED and client.check_hostname
