"""The kubelet's device manager, for the local cluster's node agent.

Device plugins register on `<node dir>/device-plugins/kubelet.sock` through the kubelet
device-plugin API v1beta1 (shared.deviceplugin), exactly as on a real node, so
virt-handler's plugins run the same code everywhere. On a registration the agent checks
the request (version, resource name, endpoint: a refusal names the field), replaces an
earlier plugin of the same resource, dials `<dir>/<endpoint>` and follows ListAndWatch:
the Node's capacity and allocatable for the resource are its Healthy devices, 0 once the
plugin goes away. At container start, resources a container requests that a plugin
serves are allocated (free Healthy IDs, then the plugin's Allocate) and the answer's
envs, mounts and device nodes are applied to the container.

Like a starting kubelet, the agent empties the directory's sockets first, so plugins of a
previous agent see their socket vanish (and kubelet.sock recreated) and register again.
Allocations live in memory only: a restarted agent forgets which IDs running pods hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from localkube.nodeagent.podspec import Container
from localkube.nodeagent.refs import ConfigError
from localkube.nodeagent.runtime import Mount
from shared.deviceplugin import (
    API_VERSION,
    KUBELET_SOCKET,
    AllocateRequest,
    CallFailed,
    ContainerAllocateRequest,
    ContainerAllocateResponse,
    DevicePluginError,
    Health,
    RegisterRequest,
    RegistrationRefused,
    rpc,
)

log = structlog.get_logger()

SUPPORTED_VERSIONS = (API_VERSION,)
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_DOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_EXTENDED = re.compile(rf"(?P<domain>{_DOMAIN})/{_NAME}")


class DeviceAllocationError(ConfigError):
    """A container's device request cannot be met (no plugin, too few devices, refused)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Allocation:
    """What the plugins' answers add to one container."""

    env: Mapping[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()


def validate(request: RegisterRequest, directory: Path) -> None:
    """RegistrationRefused naming the first bad field, as the kubelet refuses one."""
    if request.version not in SUPPORTED_VERSIONS:
        raise RegistrationRefused(
            "version",
            f"unsupported device-plugin API version {request.version!r}; "
            f"this node supports {', '.join(SUPPORTED_VERSIONS)}",
        )
    match = _EXTENDED.fullmatch(request.resource_name)
    if match is None or len(request.resource_name) > 253:
        raise RegistrationRefused(
            "resource_name",
            f"{request.resource_name!r} is not an extended resource name (<domain>/<name>)",
        )
    domain = match["domain"]
    if domain == "kubernetes.io" or domain.endswith(".kubernetes.io"):
        raise RegistrationRefused(
            "resource_name", f"{request.resource_name!r}: the kubernetes.io domain is reserved"
        )
    endpoint = request.endpoint
    if not endpoint or "/" in endpoint or endpoint in (".", "..", KUBELET_SOCKET):
        raise RegistrationRefused(
            "endpoint", f"{endpoint!r} must name a socket file in {directory}"
        )


def requested(container: Container) -> dict[str, int]:
    """Extended resources a container asks for (limits, else requests) → count."""
    res = container.resources
    merged = {**(res.get("requests") or {}), **(res.get("limits") or {})}
    out: dict[str, int] = {}
    for name, quantity in merged.items():
        if "/" not in name:
            continue
        try:
            out[name] = int(str(quantity))
        except ValueError:
            raise DeviceAllocationError(f"{name}: {quantity!r} is not a whole number") from None
    return out


class _Plugin:
    """One registered plugin: its socket, client and last device list."""

    def __init__(self, request: RegisterRequest, path: Path) -> None:
        self.resource = request.resource_name
        self.path = path
        self.devices: dict[str, str] = {}
        self.client: rpc.PluginClient | None = None
        self.task: asyncio.Task[None] | None = None

    def healthy(self) -> list[str]:
        return [i for i, health in self.devices.items() if health == Health.HEALTHY]


class DeviceManager:
    """Serves Registration, follows the plugins, allocates their devices to containers."""

    def __init__(
        self, directory: Path, *, on_change: Callable[[], None], call_timeout: float = 10.0
    ) -> None:
        self.directory = directory
        self._on_change = on_change
        self._timeout = call_timeout
        self._plugins: dict[str, _Plugin] = {}
        self._known: dict[str, int] = {}  # every resource ever registered → healthy count
        self._in_use: dict[str, dict[str, str]] = {}  # resource → device ID → pod UID
        self._tg: asyncio.TaskGroup | None = None
        self.allocate_calls = 0

    def capacity(self) -> dict[str, str]:
        """Resource → Healthy devices, for the Node's capacity and allocatable."""
        return {name: str(count) for name, count in self._known.items()}

    async def run(self) -> None:
        """Serve kubelet.sock until cancelled; the plugins' streams end with it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for entry in self.directory.iterdir():
            if entry.is_socket():
                entry.unlink(missing_ok=True)
        server = rpc.UnixServer(self.directory / KUBELET_SOCKET, rpc.registration_handler(self))
        await server.start()
        log.info("device_registration_serving", socket=str(server.path))
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                await asyncio.Event().wait()  # until cancelled: the agent is stopping
        finally:
            self._tg = None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(3):
                    await server.stop(1.0)

    async def register(self, request: RegisterRequest) -> None:
        """rpc.RegistrationService: validate, then follow the plugin (in the background)."""
        try:
            validate(request, self.directory)
        except RegistrationRefused as exc:
            log.warning(
                "device_plugin_refused",
                resource=request.resource_name,
                field=exc.field,
                reason=exc.reason,
            )
            raise
        if self._tg is None:
            raise RegistrationRefused("endpoint", "the node agent is stopping")
        plugin = _Plugin(request, self.directory / request.endpoint)
        if (old := self._plugins.get(plugin.resource)) is not None and old.task is not None:
            old.task.cancel()
        self._plugins[plugin.resource] = plugin
        self._known.setdefault(plugin.resource, 0)
        plugin.task = self._tg.create_task(self._follow(plugin), name=f"plugin-{plugin.resource}")
        log.info("device_plugin_registered", resource=plugin.resource, endpoint=request.endpoint)

    async def _follow(self, plugin: _Plugin) -> None:
        try:
            async with rpc.PluginClient(plugin.path) as client:
                plugin.client = client
                async for answer in client.list_and_watch():
                    plugin.devices = {d.id: d.health for d in answer.devices}
                    self._set_count(plugin)
            log.info("device_plugin_stream_ended", resource=plugin.resource)
        except CallFailed as exc:
            log.warning("device_plugin_gone", resource=plugin.resource, error=exc.details)
        except Exception:  # a task boundary: one broken plugin must not stop the node
            log.exception("device_plugin_follow_failed", resource=plugin.resource)
        finally:
            if self._plugins.get(plugin.resource) is plugin:
                del self._plugins[plugin.resource]
                plugin.devices = {}
                self._set_count(plugin)

    def _set_count(self, plugin: _Plugin) -> None:
        count = len(plugin.healthy())
        if self._known.get(plugin.resource) != count:
            self._known[plugin.resource] = count
            log.info("device_capacity_changed", resource=plugin.resource, healthy=count)
            self._on_change()

    async def allocate(self, pod_uid: str, container: Container) -> Allocation:
        """Allocate every plugin-served resource the container requests; apply the answers."""
        answers = []
        for resource, count in requested(container).items():
            if resource in self._known and count > 0:
                answers.append(await self._allocate_one(pod_uid, resource, count))
        return _apply(answers)

    async def _allocate_one(
        self, pod_uid: str, resource: str, count: int
    ) -> ContainerAllocateResponse:
        plugin = self._plugins.get(resource)
        if plugin is None or plugin.client is None:
            raise DeviceAllocationError(f"{resource}: no device plugin is registered")
        in_use = self._in_use.setdefault(resource, {})
        free = [i for i in plugin.healthy() if i not in in_use]
        if len(free) < count:
            raise DeviceAllocationError(
                f"{resource}: {count} requested, {len(free)} healthy and free"
            )
        ids = tuple(free[:count])
        in_use.update(dict.fromkeys(ids, pod_uid))
        request = AllocateRequest(container_requests=(ContainerAllocateRequest(devices_ids=ids),))
        try:
            answer = await plugin.client.allocate(request, timeout=self._timeout)
        except DevicePluginError as exc:
            for i in ids:
                in_use.pop(i, None)
            raise DeviceAllocationError(f"{resource}: Allocate failed: {exc}") from None
        self.allocate_calls += 1
        log.info("devices_allocated", resource=resource, ids=list(ids))
        if len(answer.container_responses) != 1:
            raise DeviceAllocationError(f"{resource}: the plugin answered for no container")
        return answer.container_responses[0]

    def release(self, pod_uid: str) -> None:
        """The pod is gone: its device IDs are free again."""
        for in_use in self._in_use.values():
            for device in [i for i, uid in in_use.items() if uid == pod_uid]:
                del in_use[device]


def _apply(answers: list[ContainerAllocateResponse]) -> Allocation:
    env: dict[str, str] = {}
    mounts: list[Mount] = []
    for answer in answers:
        env.update(answer.envs)
        for m in answer.mounts:
            mounts.append(
                Mount(source=Path(m.host_path), target=m.container_path, read_only=m.read_only)
            )
        for d in answer.devices:
            host = Path(d.host_path)
            if not (host.is_char_device() or host.is_block_device()):
                raise DeviceAllocationError(f"device {host} is not a device node on this host")
            ro = "w" not in d.permissions
            mounts.append(Mount(source=host, target=d.container_path, read_only=ro))
    return Allocation(env=env, mounts=tuple(mounts))
