"""The whole daemon in-process: FakeApi for Kubernetes, stand-in launchers on real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp

from handler.config import Config, Timing
from handler.daemon import Handler
from handler.launchers import launcher_socket
from shared.kube import Registry
from shared.labels import HEARTBEAT_ANNOTATION, SCHEDULABLE_LABEL
from shared.model import VMIPhase
from shared.podlayout import LAUNCHER_INIT_SOCKET, LAUNCHER_SOCKET
from shared.wire.client import RpcClient, Tier
from shared.wire.domain import DomainEvent, DomainState, EventType
from shared.wire.launcher_api import NOTIFY_METHOD, Method
from shared.wire.server import RpcServer, ServerInfo
from tests.unit.handler.fakes import NODE, FakeApi, FakeLauncher, vmi_dict
from tests.unit.handler.waiting import until

TIMING = Timing(heartbeat_interval=0.2, ping_interval=0.2, acpi_interval=0.2, stats_timeout=1.0)


def _config(tmp_path: Path) -> Config:
    return Config(
        node_name=NODE,
        pods_dir=tmp_path / "pods",
        notify_socket=tmp_path / "nodes" / NODE / "domain-notify.sock",
        kubeconfig=None,
        workers=2,
        listen_host="127.0.0.1",
        listen_port=0,
        devices=(Path("/dev/null"),),
        required_devices=(Path("/dev/null"),),
        log_format="console",
        timing=TIMING,
    )


@contextlib.asynccontextmanager
async def stand_in_launcher(sockets: Path, fake: FakeLauncher) -> AsyncIterator[None]:
    """Serve the launcher protocol from `fake`, ready once renamed to launcher-sock."""
    server = RpcServer(info=ServerInfo(server="stand-in"))
    for method in Method:

        async def handler(args: Mapping[str, Any], method: Method = method) -> Any:
            return await fake.call(method, args)

        server.register(str(method), handler)
    sockets.mkdir(parents=True, exist_ok=True)
    started = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(server.serve(sockets / LAUNCHER_INIT_SOCKET, started=started))
        await started.wait()
        (sockets / LAUNCHER_INIT_SOCKET).rename(sockets / LAUNCHER_SOCKET)
        yield
        task.cancel()


@contextlib.asynccontextmanager
async def running_handler(config: Config, api: FakeApi) -> AsyncIterator[Handler]:
    handler = Handler(config, api=api, registry=Registry())
    stop = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        tg.create_task(handler.run(stop))
        await until(handler.ready, "handler ready")
        try:
            yield handler
        finally:
            stop.set()


async def _get(port: int | None, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as r,
    ):
        return r.status, await r.text()


async def test_vmi_runs_and_node_metrics_and_probes_follow(tmp_path: Path) -> None:
    """Scheduled VMI → Running in one write; Node schedulable; /metrics has its series."""
    config, api, fake = _config(tmp_path), FakeApi(), FakeLauncher()
    key = "default/tiny"
    api.put_vmi(vmi_dict(pod_uid="pod-a"))
    sockets = launcher_socket(config.pods_dir, "pod-a").parent
    async with running_handler(config, api) as handler, stand_in_launcher(sockets, fake):
        await until(lambda: api.vmi(key).status.phase is VMIPhase.RUNNING, "Running")
        await until(lambda: handler.heartbeat.last is True, "schedulable")
        status, body = await _get(handler.http.bound_port, "/metrics")
        assert status == 200
        assert (
            'kubevirt_vmi_cpu_usage_seconds_total{name="tiny",namespace="default",node="node01"} 2.5'
            in body
        )
        assert 'kubevirt_virt_handler_ready_status{node="node01"} 1.0' in body
        assert 'kubevirt_workqueue_adds_total{name="virt-handler-vmi"}' in body
        assert (await _get(handler.http.bound_port, "/readyz"))[0] == 200
        assert (await _get(handler.http.bound_port, "/healthz"))[0] == 200
    assert api.status_writes[key] == 1
    node = api.nodes[NODE]["metadata"]
    assert node["labels"][SCHEDULABLE_LABEL] == "false"  # said on the way out
    assert HEARTBEAT_ANNOTATION in node["annotations"]
    assert api.node_patches[0]["metadata"]["labels"][SCHEDULABLE_LABEL] == "false"  # starting
    assert not config.notify_socket.exists()


async def test_pushed_domain_events_reach_the_status(tmp_path: Path) -> None:
    """A guest powering off, pushed on the notify socket: Succeeded and the launcher deleted."""
    config, api, fake = _config(tmp_path), FakeApi(), FakeLauncher()
    key = "default/tiny"
    api.put_vmi(vmi_dict(pod_uid="pod-a"))
    sockets = launcher_socket(config.pods_dir, "pod-a").parent
    async with running_handler(config, api), stand_in_launcher(sockets, fake):
        await until(lambda: api.vmi(key).status.phase is VMIPhase.RUNNING, "Running")
        assert fake.domain is not None
        off = dataclasses.replace(fake.domain, state=DomainState.SHUTOFF, reason="Shutdown")
        fake.domain = off
        event = DomainEvent(type=EventType.MODIFIED, domain=off, reason="Stopped")
        async with RpcClient.connect(config.notify_socket) as client:
            await client.call(NOTIFY_METHOD, event.to_wire(), tier=Tier.SHORT)
        await until(lambda: api.vmi(key).status.phase is VMIPhase.SUCCEEDED, "Succeeded")
        await until(lambda: Method.DELETE in fake.calls, "launcher deleted")
    assert api.status_writes[key] == 2


async def test_deleted_vmi_is_shut_down_with_acpi(tmp_path: Path) -> None:
    """VMI deletion: ACPI sent over the socket; the guest obeys; Succeeded."""
    config, api, fake = _config(tmp_path), FakeApi(), FakeLauncher()
    key = "default/tiny"
    api.put_vmi(vmi_dict(pod_uid="pod-a"))
    sockets = launcher_socket(config.pods_dir, "pod-a").parent
    async with running_handler(config, api), stand_in_launcher(sockets, fake):
        await until(lambda: api.vmi(key).status.phase is VMIPhase.RUNNING, "Running")
        api.delete_vmi(key)
        await until(lambda: api.vmi(key).status.phase is VMIPhase.SUCCEEDED, "Succeeded")
    assert fake.count(Method.SHUTDOWN) == 1 and fake.count(Method.KILL) == 0
