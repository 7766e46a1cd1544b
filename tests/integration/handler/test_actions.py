"""The actions endpoint (handler/actions.py, what the controller's subresource API calls)
mounted in the daemon, over mutual TLS, against the real guest: pause/unpause, a guest
agent query, and the serial console as a websocket."""

from __future__ import annotations

import shutil
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from handler.actions import CONTROLLER_CN, ActionsConfig
from shared.kube import KubeClient
from shared.labels import HANDLER_ENDPOINT_ANNOTATION
from shared.model import ConditionStatus, VMIConditionType, VMIPhase
from tests.integration.handler.node import BOOT_TIMEOUT, Node, new_root, on_cluster
from tests.integration.launcher.harness import TICK
from tests.unit.handler import certs
from tests.unit.handler.waiting import until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture
async def secured(
    guest: Path, kube: KubeClient, ns: str, tmp_path: Path
) -> AsyncIterator[tuple[Node, ssl.SSLContext]]:
    """A node whose handler serves actions to the holder of the controller's certificate."""
    ca = certs.ca(tmp_path, "kubevirt-py-ca")
    server = certs.leaf(tmp_path, "kubevirt-py-handler", ca, server=True)
    client = certs.leaf(tmp_path, CONTROLLER_CN, ca, server=False)
    cert_dir = tmp_path / "virt-handler-certs"  # the mounted Secret's layout
    cert_dir.mkdir()
    shutil.copy(server.cert, cert_dir / "tls.crt")
    shutil.copy(server.key, cert_dir / "tls.key")
    shutil.copy(ca.cert, cert_dir / "ca.crt")
    config = ActionsConfig(cert_dir=cert_dir, host="127.0.0.1", port=0)
    ctx = ssl.create_default_context(cafile=ca.cert)
    ctx.load_cert_chain(client.cert, client.key)
    async with on_cluster(Node(new_root(), kube=kube, namespace=ns, actions=config)) as node:
        yield node, ctx


async def test_actions_reach_the_real_guest(secured: tuple[Node, ssl.SSLContext]) -> None:
    """The endpoint is published on the Node; pause and unpause show in the VMI's
    conditions; guestosinfo comes from the agent; the console streams the serial output."""
    node, ctx = secured
    key = await node.add_vmi(name="remote")
    await node.wait_phase(key, VMIPhase.RUNNING)
    await until(lambda: node.vmi(key).status.guest_os_info is not None, "agent", BOOT_TIMEOUT)
    assert node.handler is not None and node.handler.actions is not None
    await until(
        lambda: (
            node.handler is not None
            and node.handler.actions is not None
            and node.handler.actions.published.is_set()
        ),
        "endpoint published",
        30,
    )
    url = (await node.node_object())["metadata"]["annotations"][HANDLER_ENDPOINT_ANNOTATION]
    base = f"{url}/v1/namespaces/{node.namespace}/virtualmachineinstances/remote"
    async with aiohttp.ClientSession() as session:
        async with session.put(f"{base}/pause", ssl=ctx) as resp:
            assert resp.status == 200, await resp.text()
        await until(
            lambda: node.vmi(key).status.condition_is_true(VMIConditionType.PAUSED), "Paused", 30
        )
        async with session.put(f"{base}/unpause", ssl=ctx) as resp:
            assert resp.status == 200, await resp.text()
        await until(
            lambda: node.vmi(key).status.condition(VMIConditionType.PAUSED) is None, "unpaused", 30
        )
        ready = node.vmi(key).status.condition(VMIConditionType.READY)
        assert ready is not None and ready.status is ConditionStatus.TRUE
        async with session.get(f"{base}/guestosinfo", ssl=ctx) as resp:
            assert resp.status == 200
            assert (await resp.json())["guestAgentVersion"]
        async with session.ws_connect(
            f"{base}/console", ssl=ctx, protocols=("plain.kubevirt.io",)
        ) as ws:
            seen = b""
            while TICK.encode() not in seen:
                seen += await ws.receive_bytes(timeout=10)
