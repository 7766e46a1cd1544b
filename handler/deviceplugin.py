"""The node's guest devices advertised through the kubelet device-plugin API (v1beta1).

Launcher pods request `devices.kubevirt.io/tun` (and `/kvm` unless guests may be emulated);
the kubelet learns those resources from us: one plugin per device (`kvm` → /dev/kvm,
`tun` → /dev/net/tun, `vhost-net` → /dev/vhost-net, `vhost-vsock` → /dev/vhost-vsock,
which autoattachVSOCK's launcher pods request), each advertising `count` IDs that all
share the one host device (so `count` guests fit), Healthy while the device check of
handler.devices passes and Unhealthy otherwise. Allocate hands the container the host
device node, read-write.

Per plugin: serve `<dir>/kubevirt-<name>.sock`, Register with `<dir>/kubelet.sock`, then
every `interval` re-check the device (a change reaches the kubelet through ListAndWatch)
and watch both sockets: a recreated kubelet.sock (kubelet restarted) or our socket gone
(a starting kubelet empties the directory) means serve anew and register again. So does
a dropped kubelet connection: the ListAndWatch stream the kubelet opened closes while we
still serve (the kubelet then forgets the resource and pods requesting it cannot start),
or no stream is opened within `stream_grace` of a registration. And one drop only the
Node shows (the kubelet forgot us while our end of its stream stayed open): the audit
(handler.deviceaudit) reads the Node's allocatable and drops a plugin it does not show.
Stop: stop serving and delete our sockets; the kubelet then drops the resource to 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

import structlog

from handler.deviceaudit import AdvertisedAudit, Allocatable, AuditConfig
from handler.devicegrpc import GrpcPluginServer, KubeletSocket
from handler.devices import DeviceCheck, check_device
from shared.deviceplugin import (
    API_VERSION,
    DEFAULT_DIR,
    AllocateRequest,
    AllocateResponse,
    AllocationRefused,
    CallFailed,
    ContainerAllocateResponse,
    Device,
    DevicePluginOptions,
    DeviceSpec,
    Health,
    ListAndWatchResponse,
    PreferredAllocationRequest,
    PreferredAllocationResponse,
    PreStartContainerRequest,
    PreStartContainerResponse,
    RegisterRequest,
    RegistrationRefused,
)
from shared.deviceplugin.messages import ContainerPreferredAllocationResponse
from shared.labels import DEVICE_RESOURCE_PREFIX
from shared.tasks import cancelling

log = structlog.get_logger("handler.deviceplugin")

DEVICES: Mapping[str, Path] = MappingProxyType(
    {
        "kvm": Path("/dev/kvm"),
        "tun": Path("/dev/net/tun"),
        "vhost-net": Path("/dev/vhost-net"),
        "vhost-vsock": Path("/dev/vhost-vsock"),  # autoattachVSOCK
    }
)
MAX_BACKOFF = 30.0

Identity = tuple[int, int] | None
HealthCheck = Callable[[Path], DeviceCheck]
DEFAULT_CHECK: HealthCheck = partial(check_device, required=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class DevicePluginsConfig:
    """Where the kubelet's device-plugin sockets live and how the plugins behave."""

    directory: Path = DEFAULT_DIR
    count: int = 1000  # IDs per resource: how many guests may share the device
    interval: float = 5.0  # device re-check and socket watch
    call_timeout: float = 5.0
    stop_grace: float = 1.0
    # Registered, but no ListAndWatch stream opened by the kubelet after this long: the
    # kubelet lost the registration, register again.
    stream_grace: float = 15.0
    audit: AuditConfig = field(default_factory=AuditConfig)  # the Node read back
    devices: Mapping[str, Path] = field(default_factory=lambda: DEVICES)


class DevicePlugin:
    """One device's plugin service (rpc.PluginService): its IDs, health and allocations."""

    def __init__(self, *, name: str, path: Path, count: int) -> None:
        self.name = name
        self.path = path
        self.resource = DEVICE_RESOURCE_PREFIX + name
        self.endpoint = f"kubevirt-{name}.sock"
        self._ids = tuple(f"{name}-{i}" for i in range(count))
        self._known = frozenset(self._ids)
        self.healthy = False
        self.allocations = 0
        self.serving = False
        self.streams_opened = 0  # ListAndWatch calls since we last started serving
        self.registered_at: float | None = None  # loop time of the registration now in force
        self.drop_reason: str | None = None  # why `lost` was set, when not a closed stream
        self._generation = 0
        self._changed = asyncio.Event()
        self.lost = asyncio.Event()  # a stream of this serving generation closed early

    def set_health(self, healthy: bool) -> bool:
        """Record the device's health; True (and ListAndWatch streams wake) when it changed."""
        if healthy == self.healthy:
            return False
        self.healthy = healthy
        self._wake()
        return True

    def set_serving(self, serving: bool) -> None:
        """Not serving: open ListAndWatch streams end (the kubelet sees the plugin leave).
        Serving again starts a new generation: streams of the old one no longer count."""
        if serving and not self.serving:
            self._generation += 1
            self.streams_opened = 0
            self.lost = asyncio.Event()
            self.drop_reason = None
        if not serving:
            self.registered_at = None
        self.serving = serving
        self._wake()

    def drop(self, reason: str) -> None:
        """Something other than our stream shows the kubelet lost us: register again."""
        if self.serving and not self.lost.is_set():
            self.drop_reason = reason
            self.lost.set()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def devices(self) -> ListAndWatchResponse:
        health = Health.HEALTHY if self.healthy else Health.UNHEALTHY
        return ListAndWatchResponse(devices=tuple(Device(id=i, health=health) for i in self._ids))

    def options(self) -> DevicePluginOptions:
        return DevicePluginOptions()

    async def list_and_watch(self) -> AsyncGenerator[ListAndWatchResponse, None]:
        """The device list now and after every health change, until the caller goes or
        the plugin stops serving. A stream that ends otherwise (the kubelet closed it, or
        its connection broke) while we still serve sets `lost`: register again."""
        generation = self._generation
        self.streams_opened += 1
        try:
            while self.serving and generation == self._generation:
                changed = self._changed
                yield self.devices()
                await changed.wait()  # not I/O: waits for our own next health change
        finally:
            if self.serving and generation == self._generation:
                self.lost.set()

    async def allocate(self, request: AllocateRequest) -> AllocateResponse:
        """Every container gets the host device node at the same path, read-write."""
        responses = []
        for container in request.container_requests:
            unknown = sorted(set(container.devices_ids) - self._known)
            if unknown:
                raise AllocationRefused(f"{self.resource}: unknown device IDs {unknown[:3]}")
            node = str(self.path)
            spec = DeviceSpec(container_path=node, host_path=node, permissions="rw")
            responses.append(ContainerAllocateResponse(devices=(spec,)))
        self.allocations += 1
        log.info("device_allocated", resource=self.resource, containers=len(responses))
        return AllocateResponse(container_responses=tuple(responses))

    async def preferred_allocation(
        self, request: PreferredAllocationRequest
    ) -> PreferredAllocationResponse:
        """Any IDs do (they share one device): the required ones, then the first available."""
        out = []
        for c in request.container_requests:
            ids = list(dict.fromkeys((*c.must_include_device_ids, *c.available_device_ids)))
            chosen = tuple(ids[: c.allocation_size])
            out.append(ContainerPreferredAllocationResponse(device_ids=chosen))
        return PreferredAllocationResponse(container_responses=tuple(out))

    async def pre_start(self, request: PreStartContainerRequest) -> PreStartContainerResponse:
        return PreStartContainerResponse()


class Kubelet(Protocol):
    """How the plugins reach the kubelet (rpc over kubelet.sock, or a fake)."""

    async def register(self, request: RegisterRequest) -> None: ...

    def identity(self) -> Identity: ...


class PluginServer(Protocol):
    """One plugin served on its socket."""

    async def start(self) -> None: ...

    async def stop(self, grace: float) -> None: ...

    def alive(self) -> bool: ...


ServerFactory = Callable[[DevicePlugin], PluginServer]


class DevicePlugins:
    """Every device's plugin, kept registered with the kubelet until `shutdown`."""

    def __init__(
        self,
        config: DevicePluginsConfig,
        *,
        kubelet: Kubelet | None = None,
        serve: ServerFactory | None = None,
        check: HealthCheck = DEFAULT_CHECK,
        allocatable: Allocatable | None = None,
    ) -> None:
        self.config = config
        self.plugins = tuple(
            DevicePlugin(name=name, path=path, count=config.count)
            for name, path in config.devices.items()
        )
        self._kubelet = kubelet or KubeletSocket(config.directory, config.call_timeout)
        self._serve = serve or partial(GrpcPluginServer, config.directory)
        self._check = check
        self._allocatable = allocatable  # the Node's status.allocatable, for the audit
        self._stop = asyncio.Event()
        self._done = asyncio.Event()
        self._started = False
        self.registrations = 0

    async def run(self) -> None:
        """One task per plugin; returns once `shutdown` has withdrawn every plugin."""
        self._started = True
        if self._stop.is_set():
            return
        try:
            async with asyncio.TaskGroup() as tg:
                for plugin in self.plugins:
                    tg.create_task(self._keep_registered(plugin), name=f"plugin-{plugin.name}")
                if self._allocatable is not None:
                    audit = AdvertisedAudit(self.plugins, self._allocatable, self.config.audit)
                    tg.create_task(audit.run(self._stop), name="device-plugin-audit")
        finally:
            self._done.set()

    async def shutdown(self, timeout: float) -> None:
        """Stop serving and delete our sockets; at most `timeout` seconds."""
        self._stop.set()
        if not self._started:
            return
        try:
            async with asyncio.timeout(timeout):
                await self._done.wait()
        except TimeoutError:
            if cancelling():
                raise
            log.warning("device_plugins_stop_timed_out")

    def refresh(self, plugin: DevicePlugin) -> None:
        """Re-check the plugin's device; log a health change once."""
        check = self._check(plugin.path)
        if plugin.set_health(check.ok):
            log_fn = log.info if check.ok else log.warning
            log_fn(
                "device_health_changed",
                resource=plugin.resource,
                health=str(Health.HEALTHY if check.ok else Health.UNHEALTHY),
                detail=check.message,
            )

    async def _keep_registered(self, plugin: DevicePlugin) -> None:
        backoff, waiting_logged = 1.0, False
        while not self._stop.is_set():
            kubelet = self._kubelet.identity()
            if kubelet is None:
                if not waiting_logged:
                    log.info("kubelet_socket_missing", directory=str(self.config.directory))
                    waiting_logged = True
                await self._sleep(self.config.interval)
                continue
            waiting_logged = False
            try:
                served = await self._serve_once(plugin, kubelet)
            except Exception:  # a task boundary: one plugin's failure must not stop the handler
                log.exception("device_plugin_failed", resource=plugin.resource)
                served = False
            if served:
                backoff = 1.0
            else:
                await self._sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF)

    async def _serve_once(self, plugin: DevicePlugin, kubelet: Identity) -> bool:
        """Serve, register and watch until something changes; False if it did not get
        registered (retried after a backoff)."""
        server = self._serve(plugin)
        try:
            plugin.set_serving(True)
            await server.start()
            if not await self._register(plugin):
                return False
            await self._watch(plugin, server, kubelet)
            return True
        except OSError as exc:
            log.warning("device_plugin_serve_failed", resource=plugin.resource, error=str(exc))
            return False
        finally:
            await self._withdraw(plugin, server)

    async def _register(self, plugin: DevicePlugin) -> bool:
        self.refresh(plugin)
        request = RegisterRequest(
            version=API_VERSION,
            endpoint=plugin.endpoint,
            resource_name=plugin.resource,
            options=plugin.options(),
        )
        try:
            await self._kubelet.register(request)
        except RegistrationRefused as exc:
            log.error(
                "device_plugin_registration_refused",
                resource=plugin.resource,
                field=exc.field,
                reason=exc.reason,
            )
            return False
        except CallFailed as exc:
            log.warning("device_plugin_register_failed", resource=plugin.resource, error=str(exc))
            return False
        self.registrations += 1
        plugin.registered_at = asyncio.get_running_loop().time()
        log.info("device_plugin_registered", resource=plugin.resource, healthy=plugin.healthy)
        return True

    async def _watch(self, plugin: DevicePlugin, server: PluginServer, kubelet: Identity) -> None:
        """Until stopped, the kubelet restarts, our socket disappears, or the kubelet's
        connection drops (its stream closed, or never opened)."""
        loop = asyncio.get_running_loop()
        registered = loop.time()
        while not self._stop.is_set():
            await self._sleep(self.config.interval, wake=plugin.lost)
            if self._stop.is_set():
                return
            if plugin.lost.is_set():
                if plugin.drop_reason is None:
                    log.warning("device_plugin_stream_closed", resource=plugin.resource)
                return
            if plugin.streams_opened == 0 and loop.time() - registered >= self.config.stream_grace:
                log.warning("device_plugin_not_dialled", resource=plugin.resource)
                return
            self.refresh(plugin)
            if self._kubelet.identity() != kubelet:
                log.info("kubelet_restarted", resource=plugin.resource)
                return
            if not server.alive():
                log.info("device_plugin_socket_removed", resource=plugin.resource)
                return

    async def _withdraw(self, plugin: DevicePlugin, server: PluginServer) -> None:
        """Stop serving (bounded, also when cancelled) and delete our socket."""
        plugin.set_serving(False)
        try:
            async with asyncio.timeout(self.config.stop_grace + 2.0):
                await server.stop(self.config.stop_grace)
        except TimeoutError:
            log.warning("device_plugin_stop_timed_out", resource=plugin.resource)
        if self._stop.is_set():
            log.info("device_plugin_stopped", resource=plugin.resource)

    async def _sleep(self, seconds: float, *, wake: asyncio.Event | None = None) -> None:
        """Sleep, waking early on shutdown (or when `wake` is set)."""
        events = [self._stop] if wake is None else [self._stop, wake]
        waiters = [asyncio.ensure_future(e.wait()) for e in events]
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
