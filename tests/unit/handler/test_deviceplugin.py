"""virt-handler's device plugins (handler.deviceplugin): registration, health, re-registration
after a kubelet restart, allocation and withdrawal; with a fake kubelet and fake servers
behind the module's Protocols, and once over real gRPC on unix sockets."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from handler.config import Config, Timing
from handler.daemon import Handler
from handler.deviceplugin import (
    DevicePlugin,
    DevicePlugins,
    DevicePluginsConfig,
    Identity,
    PluginServer,
)
from handler.devices import DeviceCheck, DeviceState
from handler.errors import StartupError
from shared.deviceplugin import (
    API_VERSION,
    KUBELET_SOCKET,
    AllocateRequest,
    AllocationRefused,
    CallFailed,
    ContainerAllocateRequest,
    DeviceSpec,
    Health,
    RegisterRequest,
    RegistrationRefused,
    rpc,
)
from shared.kube import Registry
from tests.unit.handler.fakes import NODE, FakeApi
from tests.unit.handler.waiting import until

DEVICES = {"kvm": Path("/dev/kvm"), "tun": Path("/dev/net/tun")}


class FakeKubelet:
    """Records registrations; `identity` stands for kubelet.sock's inode."""

    def __init__(self) -> None:
        self.requests: list[RegisterRequest] = []
        self.ident: Identity = (1, 1)
        self.refusals: list[RegistrationRefused] = []

    async def register(self, request: RegisterRequest) -> None:
        if self.refusals:
            raise self.refusals.pop(0)
        self.requests.append(request)

    def identity(self) -> Identity:
        return self.ident

    def registered(self, resource: str) -> int:
        return sum(1 for r in self.requests if r.resource_name == resource)


class FakeServer:
    def __init__(self, plugin: DevicePlugin) -> None:
        self.plugin = plugin
        self.started = self.stopped = False
        self.socket_present = True

    async def start(self) -> None:
        self.started = True

    async def stop(self, grace: float) -> None:
        self.stopped = True

    def alive(self) -> bool:
        return self.started and not self.stopped and self.socket_present


class Rig:
    """DevicePlugins wired to fakes; `healthy` decides each device's check."""

    def __init__(self) -> None:
        self.kubelet = FakeKubelet()
        self.servers: list[FakeServer] = []
        self.healthy = dict.fromkeys(DEVICES.values(), True)
        config = DevicePluginsConfig(
            directory=Path(tempfile.gettempdir()), count=3, interval=0.02, devices=DEVICES
        )
        self.plugins = DevicePlugins(
            config, kubelet=self.kubelet, serve=self._serve, check=self._check
        )

    def _serve(self, plugin: DevicePlugin) -> PluginServer:
        server = FakeServer(plugin)
        self.servers.append(server)
        return server

    def _check(self, path: Path) -> DeviceCheck:
        ok = self.healthy[path]
        state = DeviceState.OK if ok else DeviceState.MISSING
        return DeviceCheck(path=path, state=state, required=False, message="ok" if ok else "gone")

    def servers_of(self, name: str) -> list[FakeServer]:
        return [s for s in self.servers if s.plugin.name == name]

    def plugin(self, name: str) -> DevicePlugin:
        return next(p for p in self.plugins.plugins if p.name == name)


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    """The plugins running against fakes; shut down (and checked to stop) afterwards."""
    r = Rig()
    task = asyncio.create_task(r.plugins.run())
    yield r
    await r.plugins.shutdown(5)
    await asyncio.wait_for(task, 5)
    assert all(s.stopped for s in r.servers), "every server is stopped on shutdown"


async def test_every_device_is_served_and_registered(rig: Rig) -> None:
    """One plugin per device: its socket served, then a v1beta1 RegisterRequest naming
    devices.kubevirt.io/<name> and the socket file (not a path) as endpoint."""
    await until(lambda: len(rig.kubelet.requests) == 2, "two registrations")
    by_resource = {r.resource_name: r for r in rig.kubelet.requests}
    assert set(by_resource) == {"devices.kubevirt.io/kvm", "devices.kubevirt.io/tun"}
    tun = by_resource["devices.kubevirt.io/tun"]
    assert (tun.version, tun.endpoint) == (API_VERSION, "kubevirt-tun.sock")
    assert all(s.started for s in rig.servers)
    assert rig.plugin("tun").healthy


async def test_health_follows_the_device_check(rig: Rig) -> None:
    """A device that stops passing its check turns Unhealthy (logged once), and Healthy
    again when it passes."""
    await until(lambda: len(rig.kubelet.requests) == 2, "registrations")
    with capture_logs() as logs:
        rig.healthy[DEVICES["kvm"]] = False
        await until(lambda: not rig.plugin("kvm").healthy, "kvm unhealthy")
        rig.healthy[DEVICES["kvm"]] = True
        await until(lambda: rig.plugin("kvm").healthy, "kvm healthy again")
    changes = [e for e in logs if e["event"] == "device_health_changed"]
    assert [e["health"] for e in changes] == ["Unhealthy", "Healthy"]
    assert changes[0]["detail"] == "gone"


async def test_kubelet_restart_serves_anew_and_registers_again(rig: Rig) -> None:
    """A recreated kubelet.sock (new inode): the old server stops, a new one starts and
    the plugin registers again."""
    await until(lambda: rig.kubelet.registered("devices.kubevirt.io/tun") == 1, "registered")
    rig.kubelet.ident = (1, 2)
    await until(lambda: rig.kubelet.registered("devices.kubevirt.io/tun") == 2, "re-registered")
    first, second = rig.servers_of("tun")[:2]
    assert first.stopped and second.started


async def test_removed_plugin_socket_serves_anew(rig: Rig) -> None:
    """Our socket deleted (a starting kubelet empties the dir): serve again, register again."""
    await until(lambda: rig.kubelet.registered("devices.kubevirt.io/kvm") == 1, "registered")
    rig.servers_of("kvm")[0].socket_present = False
    await until(lambda: rig.kubelet.registered("devices.kubevirt.io/kvm") == 2, "re-registered")
    assert len(rig.servers_of("kvm")) == 2


async def test_closed_stream_registers_again(rig: Rig) -> None:
    """The kubelet's ListAndWatch stream closes while the plugin still serves (its
    connection dropped): the stream-closed drop is logged, and the plugin serves anew and
    registers again."""
    await until(lambda: rig.kubelet.registered("devices.kubevirt.io/tun") == 1, "registered")
    plugin = rig.plugin("tun")
    with capture_logs() as logs:
        stream = plugin.list_and_watch()
        await anext(stream)
        await stream.aclose()  # the kubelet went away
        await until(lambda: rig.kubelet.registered("devices.kubevirt.io/tun") == 2, "again")
    assert [e["resource"] for e in logs if e["event"] == "device_plugin_stream_closed"] == [
        "devices.kubevirt.io/tun"
    ]
    assert rig.servers_of("tun")[0].stopped


async def test_stream_of_an_earlier_serving_does_not_count() -> None:
    """A stream opened before the plugin served anew ends quietly: only a stream of the
    current serving marks the plugin lost."""
    plugin = DevicePlugin(name="tun", path=Path("/dev/net/tun"), count=1)
    plugin.set_serving(True)
    old = plugin.list_and_watch()
    await anext(old)
    plugin.set_serving(False)
    plugin.set_serving(True)
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(old), 1)
    assert not plugin.lost.is_set()
    assert plugin.streams_opened == 0


async def test_registration_never_dialled_registers_again() -> None:
    """A kubelet that accepted the registration but never opened ListAndWatch within
    stream_grace has lost it: the plugin registers again."""
    r = Rig()
    r.plugins.config = DevicePluginsConfig(
        directory=r.plugins.config.directory,
        count=3,
        interval=0.02,
        stream_grace=0.1,
        devices={"tun": DEVICES["tun"]},
    )
    r.plugins.plugins = (r.plugin("tun"),)
    with capture_logs() as logs:
        task = asyncio.create_task(r.plugins.run())
        try:
            await until(lambda: r.kubelet.registered("devices.kubevirt.io/tun") >= 2, "again")
        finally:
            await r.plugins.shutdown(5)
            await asyncio.wait_for(task, 5)
    assert any(e["event"] == "device_plugin_not_dialled" for e in logs)


async def test_refused_registration_is_logged_with_its_field_and_retried() -> None:
    """A refusal names the field at fault in the log; the plugin retries (with backoff)
    and registers once the kubelet accepts."""
    r = Rig()
    r.kubelet.refusals = [RegistrationRefused("version", "unsupported")]
    with capture_logs() as logs:
        task = asyncio.create_task(r.plugins.run())
        try:
            await until(lambda: len(r.kubelet.requests) == 2, "both registered", timeout=5)
        finally:
            await r.plugins.shutdown(5)
            await asyncio.wait_for(task, 5)
    refused = [e for e in logs if e["event"] == "device_plugin_registration_refused"]
    assert len(refused) == 1
    assert (refused[0]["field"], refused[0]["reason"]) == ("version", "unsupported")


async def test_missing_kubelet_socket_is_waited_for() -> None:
    """Without kubelet.sock nothing is served; the wait is logged once per plugin, and
    registration follows as soon as the socket appears."""
    r = Rig()
    r.kubelet.ident = None
    with capture_logs() as logs:
        task = asyncio.create_task(r.plugins.run())
        try:
            await asyncio.sleep(0.1)
            assert r.servers == []
            r.kubelet.ident = (7, 7)
            await until(lambda: len(r.kubelet.requests) == 2, "registered after the wait")
        finally:
            await r.plugins.shutdown(5)
            await asyncio.wait_for(task, 5)
    assert len([e for e in logs if e["event"] == "kubelet_socket_missing"]) == 2


async def test_list_and_watch_sends_the_list_then_every_change() -> None:
    """ListAndWatch yields all IDs with the current health at once, then again on each
    health change, and ends when the plugin stops serving."""
    plugin = DevicePlugin(name="tun", path=Path("/dev/net/tun"), count=2)
    plugin.set_serving(True)
    plugin.set_health(True)
    stream = plugin.list_and_watch()
    first = await anext(stream)
    assert [(d.id, d.health) for d in first.devices] == [
        ("tun-0", Health.HEALTHY),
        ("tun-1", Health.HEALTHY),
    ]
    nxt = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.01)
    assert not nxt.done()
    assert plugin.set_health(False)
    assert not plugin.set_health(False)  # no change, no wake-up
    second = await asyncio.wait_for(nxt, 1)
    assert {d.health for d in second.devices} == {Health.UNHEALTHY}
    plugin.set_serving(False)
    with pytest.raises(StopAsyncIteration):  # the stream ends: the kubelet sees us leave
        await asyncio.wait_for(anext(stream), 1)


async def test_allocate_hands_out_the_host_device_read_write() -> None:
    """Each container gets the one host device node at the same path, rw; IDs the plugin
    never advertised are refused."""
    plugin = DevicePlugin(name="kvm", path=Path("/dev/kvm"), count=4)
    answer = await plugin.allocate(
        AllocateRequest(
            container_requests=(
                ContainerAllocateRequest(devices_ids=("kvm-0",)),
                ContainerAllocateRequest(devices_ids=("kvm-1", "kvm-3")),
            )
        )
    )
    spec = DeviceSpec(container_path="/dev/kvm", host_path="/dev/kvm", permissions="rw")
    assert [r.devices for r in answer.container_responses] == [(spec,), (spec,)]
    with pytest.raises(AllocationRefused, match="unknown device IDs"):
        await plugin.allocate(
            AllocateRequest(container_requests=(ContainerAllocateRequest(devices_ids=("x",)),))
        )


# -- over real gRPC ------------------------------------------------------------------------


class Registrations:
    """A kubelet Registration service that accepts, or refuses the version."""

    def __init__(self, *, accept: bool = True) -> None:
        self.accept = accept
        self.requests: list[RegisterRequest] = []

    async def register(self, request: RegisterRequest) -> None:
        if not self.accept:
            raise RegistrationRefused("version", f"{request.version!r} is not supported")
        self.requests.append(request)


@pytest.fixture
def sockets() -> Iterator[Path]:
    """A short directory (unix socket paths are limited to 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="kvdp", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def test_plugins_over_grpc(sockets: Path) -> None:
    """Real sockets: the plugin registers with a Registration server on kubelet.sock; a
    client on the plugin's socket gets the device list and an Allocate answer; shutdown
    removes the plugin's socket."""
    registrations = Registrations()
    kubelet = rpc.UnixServer(sockets / KUBELET_SOCKET, rpc.registration_handler(registrations))
    await kubelet.start()
    config = DevicePluginsConfig(
        directory=sockets, count=3, interval=0.05, devices={"tun": Path("/dev/net/tun")}
    )
    plugins = DevicePlugins(config, check=_ok)
    task = asyncio.create_task(plugins.run())
    try:
        await until(lambda: len(registrations.requests) == 1, "registration over gRPC")
        endpoint = sockets / registrations.requests[0].endpoint
        async with rpc.PluginClient(endpoint) as client:
            stream = client.list_and_watch()
            first = await asyncio.wait_for(anext(stream), 5)
            assert first.healthy() == 3
            request = ContainerAllocateRequest(devices_ids=("tun-1",))
            answer = await client.allocate(
                AllocateRequest(container_requests=(request,)), timeout=5
            )
            assert answer.container_responses[0].devices[0].host_path == "/dev/net/tun"
            with pytest.raises(AllocationRefused, match="unknown device IDs"):
                bad = ContainerAllocateRequest(devices_ids=("nope",))
                await client.allocate(AllocateRequest(container_requests=(bad,)), timeout=5)
            await stream.aclose()
        assert plugins.plugins[0].allocations == 1
    finally:
        await plugins.shutdown(5)
        await asyncio.wait_for(task, 5)
        await kubelet.stop(0)
    assert not endpoint.exists()


async def test_refusal_keeps_its_field_over_grpc(sockets: Path) -> None:
    """A RegistrationRefused raised by the kubelet side arrives as RegistrationRefused with
    the same field and reason (INVALID_ARGUMENT on the wire)."""
    kubelet = rpc.UnixServer(
        sockets / KUBELET_SOCKET, rpc.registration_handler(Registrations(accept=False))
    )
    await kubelet.start()
    try:
        with pytest.raises(RegistrationRefused) as refused:
            await rpc.register(
                sockets / KUBELET_SOCKET, RegisterRequest(version="v1alpha1"), timeout=5
            )
    finally:
        await kubelet.stop(0)
    assert refused.value.field == "version"
    assert refused.value.reason == "'v1alpha1' is not supported"


async def test_register_without_a_kubelet_fails_as_call_failed(sockets: Path) -> None:
    """No kubelet.sock: registration fails fast with CallFailed (UNAVAILABLE)."""
    with pytest.raises(CallFailed) as failed:
        await rpc.register(sockets / KUBELET_SOCKET, RegisterRequest(), timeout=5)
    assert failed.value.code == "UNAVAILABLE"


def _ok(path: Path) -> DeviceCheck:
    return DeviceCheck(path=path, state=DeviceState.OK, required=False, message="ok")


# -- configuration and the daemon ----------------------------------------------------------


def test_configuration() -> None:
    """By default the plugins use the kubelet's dir with 1000 IDs per device; an empty
    --device-plugins-dir turns them off; nonsense counts are refused at start."""
    env = {"NODE_NAME": "n"}
    default = Config.from_args([], environ=env).device_plugins
    assert default is not None
    assert (default.directory, default.count) == (Path("/var/lib/kubelet/device-plugins"), 1000)
    assert set(default.devices) == {"kvm", "tun", "vhost-net", "vhost-vsock"}
    assert Config.from_args(["--device-plugins-dir", ""], environ=env).device_plugins is None
    with pytest.raises(StartupError, match="devices-per-resource"):
        Config.from_args(["--devices-per-resource", "0"], environ=env)


async def test_the_daemon_registers_its_plugins_and_withdraws_them_on_stop(
    sockets: Path, tmp_path: Path
) -> None:
    """The handler runs its device plugins in its TaskGroup; on stop it withdraws them
    (sockets deleted) before it returns."""
    registrations = Registrations()
    kubelet = rpc.UnixServer(sockets / KUBELET_SOCKET, rpc.registration_handler(registrations))
    await kubelet.start()
    config = Config(
        node_name=NODE,
        pods_dir=tmp_path / "pods",
        notify_socket=sockets / "notify.sock",
        kubeconfig=None,
        workers=1,
        listen_host="127.0.0.1",
        listen_port=0,
        devices=(Path("/dev/null"),),
        required_devices=(),
        log_format="console",
        timing=Timing(heartbeat_interval=0.2, ping_interval=0.2, acpi_interval=0.2),
        device_plugins=DevicePluginsConfig(directory=sockets, count=2, interval=0.05),
    )
    handler = Handler(config, api=FakeApi(), registry=Registry())
    stop = asyncio.Event()
    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(handler.run(stop))
            await until(lambda: len(registrations.requests) == 4, "four plugins registered")
            endpoints = [sockets / r.endpoint for r in registrations.requests]
            assert all(e.exists() for e in endpoints)
            stop.set()
    finally:
        await kubelet.stop(0)
    assert not any(e.exists() for e in endpoints)
