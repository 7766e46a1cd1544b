"""The daemon endpoint: /metrics renders the registry, /healthz and /readyz follow callbacks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from shared.kube.health import CONTENT_TYPE, HealthConfig, HealthServer, build_app, serving_tls
from shared.kube.metrics import Registry
from tests.unit.handler import certs


@pytest.mark.parametrize(
    ("path", "ready", "healthy", "status"),
    [
        pytest.param("/readyz", True, True, 200, id="ready"),
        pytest.param("/readyz", False, True, 503, id="not-ready"),
        pytest.param("/healthz", False, True, 200, id="healthy-while-not-ready"),
        pytest.param("/healthz", True, False, 503, id="unhealthy"),
    ],
)
async def test_probes_follow_callbacks(path: str, ready: bool, healthy: bool, status: int) -> None:
    """Probe endpoints answer 200 or 503 from the readiness and health callbacks."""
    app = build_app(Registry(), ready=lambda: ready, healthy=lambda: healthy)
    async with TestClient(TestServer(app)) as client:
        resp = await client.get(path)
        assert resp.status == status


async def test_metrics_endpoint_renders_registry() -> None:
    """/metrics serves the text exposition format of the registry."""
    registry = Registry()
    registry.counter("kubevirt_test_total", "Test.").labels().inc(3)
    async with TestClient(TestServer(build_app(registry, ready=lambda: True))) as client:
        resp = await client.get("/metrics")
        assert resp.headers["Content-Type"] == CONTENT_TYPE
        assert "kubevirt_test_total 3" in await resp.text()


async def test_metrics_collects_first_and_survives_a_slow_collect() -> None:
    """With a collect hook /metrics refreshes series before rendering; a collect slower
    than its deadline is abandoned and the scrape still answers with what is there."""
    registry = Registry()
    gauge = registry.gauge("kubevirt_test_value", "a value refreshed on scrape")
    calls = []

    async def collect() -> None:
        calls.append(1)
        gauge.labels().set(len(calls))
        if len(calls) > 1:
            await asyncio.sleep(30)

    app = build_app(registry, ready=lambda: True, collect=collect, collect_deadline=0.05)
    async with TestClient(TestServer(app)) as client:
        first = await (await client.get("/metrics")).text()
        slow = await client.get("/metrics")
        assert slow.status == 200
        assert "kubevirt_test_value 2" in await slow.text()
    assert "kubevirt_test_value 1" in first


async def test_server_serves_until_cancelled() -> None:
    """HealthServer.run listens on its port and closes it when cancelled."""
    server = HealthServer(HealthConfig(host="127.0.0.1", port=0), Registry(), ready=lambda: True)
    task = asyncio.create_task(server.run())
    await server.started.wait()
    url = f"http://127.0.0.1:{server.bound_port}/healthz"
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert resp.status == 200
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectionError):
            await session.get(url)


async def test_metrics_and_probes_over_https_with_a_mounted_certificate(tmp_path: Path) -> None:
    """With tls.crt + tls.key in the cert dir the endpoint is HTTPS (as KubeVirt serves its
    metrics): a TLS scrape reads the registry, plain HTTP is not answered; without the
    pair it stays HTTP."""
    assert serving_tls(None) is None and serving_tls(tmp_path) is None
    authority = certs.ca(tmp_path, "ca")
    pair = certs.leaf(tmp_path, "serving", authority, server=True)
    pair.cert.rename(tmp_path / "tls.crt")
    pair.key.rename(tmp_path / "tls.key")
    registry = Registry()
    registry.counter("kubevirt_x_total", "X.").labels().inc()
    config = HealthConfig(host="127.0.0.1", port=0, tls=serving_tls(tmp_path))
    server = HealthServer(config, registry, ready=lambda: True)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(server.run())
        await server.started.wait()
        base = f"127.0.0.1:{server.bound_port}"
        async with aiohttp.ClientSession() as session:
            async with session.get(f"https://{base}/metrics", ssl=False) as resp:
                assert resp.status == 200 and "kubevirt_x_total 1.0" in await resp.text()
            with pytest.raises(aiohttp.ClientError):
                async with session.get(f"http://{base}/healthz") as plain:
                    await plain.read()
        task.cancel()
