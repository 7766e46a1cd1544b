"""Fakes behind the handler's Protocols: launchers, the pool, the work queue, the API.

`FakeApi` is the shared in-memory API server (tests/unit/shared/kube/fakes.py: status PUT
and merge patches with optimistic concurrency) with VMI list + watch from an event log
and Node patches added.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import uuid
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from handler.launchers import LauncherState
from shared.kube import PODS, VMIS, Conflict, ListResult, WatchEvent
from shared.kube.api_types import WatchEventType
from shared.kube.mergepatch import merge_apply
from shared.kube.resources import object_key
from shared.model import VirtualMachineInstance, format_time, utc_now
from shared.wire.domain import DomainState, DomainStatus
from shared.wire.errors import CommandFailed, ErrorCode
from shared.wire.launcher_api import Method
from shared.wire.stats import BlockStats, DomainStats, NetStats, VcpuStats
from tests.unit.shared.kube.fakes import FakeApi as ObjectApi

REPO = Path(__file__).resolve().parents[3]
NODE = "node01"


def vmi_dict(
    *,
    name: str = "tiny",
    namespace: str = "default",
    phase: str = "Scheduled",
    pod_uid: str | None = "pod-1",
    node: str = NODE,
    **spec_changes: Any,
) -> dict[str, Any]:
    """The example VMI as the controller leaves it for the handler (Scheduled on `node`)."""
    vmi: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    vmi["metadata"].update(name=name, namespace=namespace, uid=str(uuid.uuid4()))
    vmi["metadata"]["labels"] = {"kubevirt.io/nodeName": node}
    vmi["spec"].update(spec_changes)
    status: dict[str, Any] = {"phase": phase, "nodeName": node}
    if pod_uid is not None:
        status["activePods"] = {pod_uid: node}
    vmi["status"] = status
    return vmi


def domain_status(
    vmi: Mapping[str, Any],
    state: DomainState = DomainState.RUNNING,
    reason: str = "Booted",
    **kw: Any,
) -> DomainStatus:
    meta = vmi["metadata"]
    return DomainStatus(
        name=f"{meta['namespace']}_{meta['name']}",
        namespace=meta["namespace"],
        vmi_name=meta["name"],
        vmi_uid=meta["uid"],
        state=state,
        reason=reason,
        **kw,
    )


SAMPLE_STATS = DomainStats(
    cpu_time_ns=2_500_000_000,
    memory_actual_kib=131072,
    memory_rss_kib=150000,
    memory_available_kib=120000,
    block=(
        BlockStats(
            name="containerdisk",
            read_bytes=4096,
            write_bytes=512,
            read_requests=8,
            write_requests=1,
            read_time_ns=3_000_000,
            write_time_ns=1_000_000,
            flush_requests=2,
            flush_time_ns=500_000,
        ),
    ),
    net=(
        NetStats(
            name="default",
            rx_bytes=1000,
            tx_bytes=2000,
            rx_packets=10,
            tx_packets=20,
            rx_errors=1,
            tx_errors=2,
            rx_dropped=3,
            tx_dropped=4,
        ),
    ),
    vcpu=(VcpuStats(id=0, state=1, time_ns=2_000_000_000),),
)

GUEST_INFO = {
    "guestAgentVersion": "7.2.0",
    "hostname": "tiny",
    "os": {"name": "BusyBox", "id": "busybox", "kernelRelease": "6.1.0"},
    "timezone": "UTC, 0",
}

GUEST_INTERFACES = {
    "items": [
        {"name": "default", "interfaceName": "eth0", "mac": "52:54:00:12:34:56",
         "ipAddresses": ["10.0.2.15", "fec0::5054:ff:fe12:3456"]},
        {"name": "", "interfaceName": "docker0", "mac": "02:42:00:00:00:01",
         "ipAddresses": ["172.17.0.1"]},
    ]
}  # fmt: skip


@dataclass
class FakeLauncher:
    """A launcher: a domain that Sync starts, ACPI stops (if `obeys_acpi`), Kill destroys."""

    vmi: Mapping[str, Any] | None = None
    state: LauncherState = LauncherState.CONNECTED
    since: float = 0.0
    domain: DomainStatus | None = None
    obeys_acpi: bool = True
    fail: dict[Method, Exception] = field(default_factory=dict)
    hang: set[Method] = field(default_factory=set)
    calls: list[Method] = field(default_factory=list)
    stats: DomainStats = SAMPLE_STATS
    interfaces: Mapping[str, Any] = field(default_factory=lambda: GUEST_INTERFACES)

    async def call(self, method: Method, args: Mapping[str, Any] | None = None) -> Any:
        self.calls.append(method)
        if method in self.hang:
            await asyncio.Future()
        if method in self.fail:
            raise self.fail[method]
        handler: Callable[[Mapping[str, Any]], Any] = getattr(self, f"_{method.value}")
        return handler(args or {})

    def count(self, method: Method) -> int:
        return self.calls.count(method)

    def _sync(self, args: Mapping[str, Any]) -> Any:
        if self.domain is None:
            vmi = args["vmi"]
            paused = vmi["spec"].get("startStrategy") == "Paused"
            self.domain = domain_status(
                vmi,
                DomainState.PAUSED if paused else DomainState.RUNNING,
                "User" if paused else "Booted",
            )
        return self.domain.to_wire()

    def _current(self) -> DomainStatus:
        if self.domain is None:
            raise CommandFailed(ErrorCode.DOMAIN_NOT_FOUND, "no domain")
        return self.domain

    def _get_domain(self, _: Mapping[str, Any]) -> Any:
        return self._current().to_wire()

    def _set(self, state: DomainState, reason: str) -> Any:
        self.domain = _replace(self._current(), state=state, reason=reason)
        return self.domain.to_wire()

    def _shutdown(self, _: Mapping[str, Any]) -> Any:
        if self.obeys_acpi:
            return self._set(DomainState.SHUTOFF, "Shutdown")
        return self._current().to_wire()

    def _kill(self, _: Mapping[str, Any]) -> Any:
        return self._set(DomainState.SHUTOFF, "Destroyed")

    def _pause(self, _: Mapping[str, Any]) -> Any:
        return self._set(DomainState.PAUSED, "User")

    def _unpause(self, _: Mapping[str, Any]) -> Any:
        return self._set(DomainState.RUNNING, "Unpaused")

    def _delete(self, _: Mapping[str, Any]) -> Any:
        self.domain = None
        return None

    def _get_domain_stats(self, _: Mapping[str, Any]) -> Any:
        return self.stats.to_wire()

    def _get_guest_info(self, _: Mapping[str, Any]) -> Any:
        return GUEST_INFO

    def _get_interfaces(self, _: Mapping[str, Any]) -> Any:
        return self.interfaces


def _replace(status: DomainStatus, **changes: Any) -> DomainStatus:
    return dataclasses.replace(status, **changes)


@dataclass
class FakePool:
    """Launchers by VMI uid; `ensure` hands out (or creates) a FakeLauncher."""

    launchers: dict[str, FakeLauncher] = field(default_factory=dict)
    sockets: dict[str, Path] = field(default_factory=dict)
    released: list[str] = field(default_factory=list)

    def ensure(self, *, uid: str, key: str, socket: Path) -> FakeLauncher:
        self.sockets[uid] = socket
        return self.launchers.setdefault(uid, FakeLauncher())

    def get(self, uid: str) -> FakeLauncher | None:
        return self.launchers.get(uid)

    def release(self, uid: str) -> None:
        self.released.append(uid)
        self.launchers.pop(uid, None)


@dataclass
class FakeQueue:
    after: list[tuple[str, float]] = field(default_factory=list)
    rate_limited: list[str] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)

    def add_after(self, key: str, delay: float) -> None:
        self.after.append((key, delay))

    def add_rate_limited(self, key: str) -> None:
        self.rate_limited.append(key)

    def forget(self, key: str) -> None:
        self.forgotten.append(key)


def _matches(selector: str, obj: Mapping[str, Any]) -> bool:
    labels = obj["metadata"].get("labels") or {}
    for term in filter(None, selector.split(",")):
        k, _, v = term.partition("=")
        if labels.get(k) != v:
            return False
    return True


class FakeApi(ObjectApi):
    """The shared in-memory API server with what `HandlerApi` adds: VMI list + watch from
    an event log, Node patches, and counts of VMI status writes and conflicts."""

    def __init__(self, *, wall: Callable[[], datetime] = utc_now) -> None:
        super().__init__()
        self.wall = wall
        self.nodes: dict[str, dict[str, Any]] = {}
        self.node_patches: list[Mapping[str, Any]] = []
        self.status_writes: Counter[str] = Counter()  # VMI key → status writes
        self.history: dict[str, list[dict[str, Any]]] = {}  # VMI key → statuses written
        self.conflicts = 0
        self._log: list[tuple[int, WatchEvent]] = []
        self._changed = asyncio.Event()

    @property
    def vmis(self) -> dict[str, dict[str, Any]]:
        """The stored VMIs by key (a view: write through `put_vmi`)."""
        return {key: obj for (plural, key), obj in self.objects.items() if plural == VMIS.plural}

    # ---- what tests do (as the controller would) --------------------------------------

    def put_vmi(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace a VMI (a write by someone else)."""
        stored = copy.deepcopy(dict(obj))
        stored.setdefault("apiVersion", "kubevirt.io/v1")
        stored.setdefault("kind", "VirtualMachineInstance")
        kind = WatchEventType.MODIFIED if object_key(stored) in self.vmis else WatchEventType.ADDED
        self._emit(kind, self.seed(VMIS, stored))
        return copy.deepcopy(self.stored(VMIS, object_key(stored)))

    def delete_vmi(self, key: str, *, finalized: bool = False) -> None:
        """Delete: with finalizers pending it only gets a deletionTimestamp."""
        obj = self.stored(VMIS, key)
        if finalized:
            del self.objects[(VMIS.plural, key)]
            self._emit(WatchEventType.DELETED, self._bump(obj))
            return
        obj["metadata"]["deletionTimestamp"] = format_time(self.wall())
        self._emit(WatchEventType.MODIFIED, self._bump(obj))

    def vmi(self, key: str) -> VirtualMachineInstance:
        return VirtualMachineInstance.from_dict(copy.deepcopy(self.stored(VMIS, key)))

    # ---- HandlerApi ---------------------------------------------------------------------

    def vmi_source(self, *, label_selector: str) -> _Source:
        return _Source(self, label_selector)

    def vmim_source(self) -> _Source:
        """No VMIMs here (a selector no VMI matches)."""
        return _Source(self, "kubevirt.io/never=listed")

    def kubevirt_source(self, namespace: str) -> _Source:
        """No KubeVirt CR here (a selector no VMI matches): the flag defaults rule."""
        return _Source(self, "kubevirt.io/never=listed")

    async def get_vmi(self, namespace: str, name: str) -> VirtualMachineInstance:
        return VirtualMachineInstance.from_dict(await self.get(VMIS, name, namespace=namespace))

    async def get_pod(self, namespace: str, name: str) -> Mapping[str, Any]:
        return await self.get(PODS, name, namespace=namespace)

    async def patch_node(self, name: str, patch: Mapping[str, Any]) -> None:
        self.node_patches.append(copy.deepcopy(dict(patch)))
        self.nodes[name] = merge_apply(self.nodes.get(name, {}), patch)

    async def node_allocatable(self, name: str) -> dict[str, str]:
        status = self.nodes.get(name, {}).get("status") or {}
        return {k: str(v) for k, v in (status.get("allocatable") or {}).items()}

    async def node_labels(self, name: str) -> dict[str, str]:
        return dict(self.nodes.get(name, {}).get("metadata", {}).get("labels") or {})

    # ---- plumbing -----------------------------------------------------------------------

    def _check_write(self, key: tuple[str, str], rv: str | None) -> dict[str, Any]:
        try:
            return super()._check_write(key, rv)
        except Conflict:
            self.conflicts += 1
            raise

    def _written(self, obj: dict[str, Any], *, status: bool) -> None:
        if status:
            key = object_key(obj)
            self.status_writes[key] += 1
            self.history.setdefault(key, []).append(copy.deepcopy(obj.get("status") or {}))
        self._emit(WatchEventType.MODIFIED, obj)

    def _emit(self, kind: WatchEventType, obj: dict[str, Any]) -> None:
        rv = int(obj["metadata"]["resourceVersion"])
        self._log.append((rv, WatchEvent(kind, copy.deepcopy(obj))))
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()


class _Source:
    """List + watch over FakeApi's event log (no event between list and watch is lost)."""

    def __init__(self, api: FakeApi, selector: str) -> None:
        self._api = api
        self._selector = selector

    async def list(self) -> ListResult:
        items = [copy.deepcopy(o) for o in self._api.vmis.values() if _matches(self._selector, o)]
        return ListResult(items, str(self._api.rv))

    async def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AsyncGenerator[WatchEvent, None]:
        seen = int(resource_version or 0)
        while True:
            changed = self._api._changed
            for rv, event in self._api._log:
                if rv > seen:
                    seen = rv
                    if _matches(self._selector, event.object):
                        yield WatchEvent(event.type, copy.deepcopy(event.object))
            await changed.wait()


class AnsweringLauncher:
    """A launcher client answering every call with `answer` (or raising `error`); the
    calls it got in `calls`."""

    def __init__(self, answer: Any = None, error: Exception | None = None) -> None:
        self.calls: list[tuple[Method, Mapping[str, Any] | None]] = []
        self._answer, self._error = answer, error

    async def call(self, method: Method, args: Mapping[str, Any] | None = None) -> Any:
        self.calls.append((method, args))
        if self._error is not None:
            raise self._error
        return self._answer
