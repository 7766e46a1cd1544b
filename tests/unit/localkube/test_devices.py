"""The node agent's device manager (localkube.nodeagent.devices): registration checks,
capacity from ListAndWatch, allocation applied to containers; against virt-handler's real
device plugin over real gRPC sockets, so both sides of the one code path meet here."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvloop
from structlog.testing import capture_logs

from handler.deviceplugin import DevicePlugins, DevicePluginsConfig
from handler.devices import DeviceCheck, DeviceState
from localkube.nodeagent.devices import (
    DeviceAllocationError,
    DeviceManager,
    requested,
    validate,
)
from localkube.nodeagent.podspec import Container
from localkube.nodeagent.runtime import Mount
from shared.deviceplugin import KUBELET_SOCKET, RegisterRequest, RegistrationRefused, rpc
from tests.unit.handler.waiting import until

TUN = "devices.kubevirt.io/tun"
GOOD = RegisterRequest(version="v1beta1", endpoint="kubevirt-tun.sock", resource_name=TUN)


def _with(**changes: Any) -> RegisterRequest:
    return dataclasses.replace(GOOD, **changes)


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        pytest.param(_with(version="v1alpha1"), "version", id="old-version"),
        pytest.param(_with(version=""), "version", id="no-version"),
        pytest.param(_with(resource_name="tun"), "resource_name", id="no-domain"),
        pytest.param(_with(resource_name="kubernetes.io/tun"), "resource_name", id="reserved"),
        pytest.param(_with(resource_name="a.kubernetes.io/x"), "resource_name", id="reserved-sub"),
        pytest.param(_with(resource_name="Devices.io/tun"), "resource_name", id="upper-domain"),
        pytest.param(_with(resource_name="devices.io/"), "resource_name", id="empty-name"),
        pytest.param(_with(endpoint=""), "endpoint", id="no-endpoint"),
        pytest.param(_with(endpoint="../x.sock"), "endpoint", id="escapes"),
        pytest.param(_with(endpoint=KUBELET_SOCKET), "endpoint", id="the-kubelet-socket"),
    ],
)
def test_bad_registrations_name_the_field(request_: RegisterRequest, field: str) -> None:
    """Each bad RegisterRequest is refused with RegistrationRefused naming its field."""
    with pytest.raises(RegistrationRefused) as refused:
        validate(request_, Path("/dp"))
    assert refused.value.field == field


def test_good_registration_passes() -> None:
    """v1beta1, an extended resource name and a socket file name are accepted."""
    validate(GOOD, Path("/dp"))


def _container(resources: dict[str, dict[str, str]]) -> Container:
    return Container.from_dict({"name": "c", "image": "i", "resources": resources})


def test_requested_reads_extended_resources() -> None:
    """Limits win over requests; native resources are not device requests."""
    c = _container({"requests": {"cpu": "1", TUN: "2"}, "limits": {TUN: "1", "memory": "1Gi"}})
    assert requested(c) == {TUN: 1}
    with pytest.raises(DeviceAllocationError, match="whole number"):
        requested(_container({"limits": {TUN: "500m"}}))


# -- the manager against the handler's plugin ----------------------------------------------


@pytest.fixture
def plugin_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kvdm", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _ok(path: Path) -> DeviceCheck:
    return DeviceCheck(path=path, state=DeviceState.OK, required=False, message="ok")


class Node:
    """A DeviceManager serving kubelet.sock, and the handler's tun plugin."""

    def __init__(self, directory: Path) -> None:
        self.changes = 0
        self.manager = DeviceManager(directory, on_change=self._changed, call_timeout=5)
        config = DevicePluginsConfig(
            directory=directory, count=3, interval=0.05, devices={"tun": Path("/dev/net/tun")}
        )
        self.plugins = DevicePlugins(config, check=_ok)
        self.plugin_task: asyncio.Task[None] | None = None

    def _changed(self) -> None:
        self.changes += 1

    def start_plugins(self) -> None:
        self.plugin_task = asyncio.create_task(self.plugins.run())

    async def stop_plugins(self) -> None:
        await self.plugins.shutdown(5)
        if self.plugin_task is not None:
            await asyncio.wait_for(self.plugin_task, 5)
            self.plugin_task = None


@pytest.fixture
async def node(plugin_dir: Path) -> AsyncIterator[Node]:
    n = Node(plugin_dir)
    manager = asyncio.create_task(n.manager.run())
    await until((plugin_dir / KUBELET_SOCKET).exists, "kubelet.sock served")
    yield n
    await n.stop_plugins()
    manager.cancel()
    with pytest.raises(asyncio.CancelledError):
        await manager
    assert not (plugin_dir / KUBELET_SOCKET).exists()


async def test_capacity_follows_the_plugin(node: Node) -> None:
    """After the plugin registers, the resource's capacity is its Healthy devices; when
    the plugin goes away it drops to 0 (and stays listed, like a kubelet's)."""
    node.start_plugins()
    await until(lambda: node.manager.capacity() == {TUN: "3"}, "tun capacity 3")
    assert node.changes >= 1
    await node.stop_plugins()
    await until(lambda: node.manager.capacity() == {TUN: "0"}, "tun capacity 0")


async def test_allocation_applies_the_plugin_answer(node: Node) -> None:
    """A container requesting the resource gets the device node (same path, rw) after
    the plugin's Allocate; IDs held by a pod are not handed out twice until released."""
    node.start_plugins()
    await until(lambda: node.manager.capacity() == {TUN: "3"}, "tun capacity")
    c = _container({"limits": {TUN: "2"}})
    allocation = await node.manager.allocate("pod-a", c)
    assert allocation.mounts == (Mount(source=Path("/dev/net/tun"), target="/dev/net/tun"),)
    assert node.plugins.plugins[0].allocations == 1
    with pytest.raises(DeviceAllocationError, match="2 requested, 1 healthy and free"):
        await node.manager.allocate("pod-b", c)
    node.manager.release("pod-a")
    await node.manager.allocate("pod-b", c)


async def test_unrequested_or_unknown_resources_need_no_plugin(node: Node) -> None:
    """A container asking for no plugin resource (or one no plugin ever registered)
    starts without any Allocate call."""
    c = _container({"limits": {"example.com/other": "1", "cpu": "1"}})
    assert (await node.manager.allocate("pod", c)).mounts == ()


async def test_allocation_after_the_plugin_left_fails_clearly(node: Node) -> None:
    """A known resource whose plugin is gone cannot be allocated: the error says so."""
    node.start_plugins()
    await until(lambda: node.manager.capacity() == {TUN: "3"}, "tun capacity")
    await node.stop_plugins()
    await until(lambda: node.manager.capacity() == {TUN: "0"}, "tun gone")
    with pytest.raises(DeviceAllocationError, match="no device plugin is registered"):
        await node.manager.allocate("pod", _container({"limits": {TUN: "1"}}))


async def test_bad_registration_is_refused_over_grpc_and_logged(node: Node) -> None:
    """A wrong version is refused to the caller with the field named; the manager keeps
    serving and a good registration still works."""
    kubelet = node.manager.directory / KUBELET_SOCKET
    with capture_logs() as logs, pytest.raises(RegistrationRefused) as refused:
        await rpc.register(kubelet, _with(version="v1alpha1"), timeout=5)
    assert refused.value.field == "version"
    assert "v1beta1" in refused.value.reason
    assert [e["field"] for e in logs if e["event"] == "device_plugin_refused"] == ["version"]
    node.start_plugins()
    await until(lambda: node.manager.capacity() == {TUN: "3"}, "good plugin registered")


async def test_stale_sockets_are_removed_on_start(plugin_dir: Path) -> None:
    """Like a starting kubelet, the manager deletes sockets left in its directory (plugins
    then see theirs vanish and register again); other files stay."""
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(plugin_dir / "old-plugin.sock"))
    stale.close()
    (plugin_dir / "kubelet_internal_checkpoint").write_text("{}")
    manager = DeviceManager(plugin_dir, on_change=lambda: None)
    task = asyncio.create_task(manager.run())
    try:
        await until((plugin_dir / KUBELET_SOCKET).exists, "kubelet.sock")
        assert not (plugin_dir / "old-plugin.sock").exists()
        assert (plugin_dir / "kubelet_internal_checkpoint").exists()
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_forking_while_grpc_runs_is_safe(node: Node) -> None:
    """The agent forks a process per container (uvloop: fork, then exec) while gRPC
    streams are open; with grpc's fork handlers installed a child now and then died of
    SIGSEGV before exec (seen as container exit 139). Every child must exit normally."""
    node.start_plugins()
    await until(lambda: node.manager.capacity() == {TUN: "3"}, "a plugin streaming")

    async def children() -> list[int]:
        async def child() -> int:
            proc = await asyncio.create_subprocess_exec("true", start_new_session=True)
            return await asyncio.wait_for(proc.wait(), 30)

        codes: list[int] = []
        for _ in range(5):
            codes += await asyncio.gather(*(child() for _ in range(20)))
        return codes

    codes = await asyncio.to_thread(uvloop.run, children())
    assert set(codes) == {0}
