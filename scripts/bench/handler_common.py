"""What both modes of bench_handler.py share: the VMIs they create, the watch that times
them, the pause round trip through a launcher socket, and the printed (a)/(b)/(c) figures."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import operator
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from localkube.cluster import Cluster
from shared.kube import VMIMS, VMIS, KubeClient, NotFound, WatchEventType
from shared.model import (
    MigrationPhase,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMIConditionType,
    VMIPhase,
)
from shared.wire.client import RpcClient
from shared.wire.launcher_api import TIERS, Method
from tests.integration.controller.harness import apiserver_metrics, sum_series
from tests.unit.handler.waiting import until_async

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "vmi-tiny.yaml"
NAMESPACE = "bench-handler"
# console (`downtime_ms=41`) and JSON (`"downtime_ms": 41`) log lines
DOWNTIME = re.compile(r'downtime_ms"?\s*[=:]\s*(\d+)')


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class Watcher:
    """Records when each VMI is first seen Running and first seen Paused."""

    def __init__(self) -> None:
        self.running: dict[str, float] = {}
        self.paused: dict[str, float] = {}
        self.node_of: dict[str, str] = {}
        self.pod_of: dict[str, str] = {}
        self.changed = asyncio.Event()

    async def run(self, kube: KubeClient) -> None:
        rv = (await kube.list(VMIS, namespace=NAMESPACE)).resource_version
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(330):
                    async with contextlib.aclosing(
                        kube.watch(VMIS, namespace=NAMESPACE, resource_version=rv)
                    ) as events:
                        async for event in events:
                            rv = event.resource_version or rv
                            if event.type in (WatchEventType.ADDED, WatchEventType.MODIFIED):
                                self._seen(VirtualMachineInstance.from_dict(event.object))

    def _seen(self, vmi: VirtualMachineInstance) -> None:
        now = time.monotonic()
        if vmi.status.phase is VMIPhase.RUNNING and vmi.name not in self.running:
            self.running[vmi.name] = now
            self.node_of[vmi.name] = vmi.status.node_name or ""
            self.pod_of[vmi.name] = next(iter(vmi.status.active_pods), "")
        if vmi.status.condition_is_true(VMIConditionType.PAUSED):
            self.paused.setdefault(vmi.name, now)
        self.changed.set()

    async def until(self, predicate: Callable[[], bool], timeout: float) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self.changed.clear()
                await self.changed.wait()


def vmi_body(name: str) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))
    body["metadata"] = {"name": name}
    return body


async def create_paced(
    kube: KubeClient, *, count: int, rate: float, created: dict[str, float]
) -> None:
    """Create `count` VMIs at `rate` per second, recording when each was sent."""
    for i in range(count):
        name = f"bench-{i:04d}"
        created[name] = time.monotonic()
        await kube.create(VMIS, vmi_body(name), namespace=NAMESPACE)
        await asyncio.sleep(1.0 / rate)


async def writes(cluster: Cluster) -> dict[str, float]:
    text = await apiserver_metrics(cluster)
    out = {}
    for resource in ("virtualmachineinstances", "pods"):
        for verb in ("POST", "PUT", "PATCH", "DELETE"):
            labels: Mapping[str, str] = {"resource": resource, "verb": verb}
            out[f"{resource} {verb}"] = sum_series(text, "apiserver_request_total", labels)
    return out


def host_cpu_seconds() -> float:
    """Busy CPU time of the whole host so far (user+nice+system+irq+softirq, all cores)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


async def settle(*, busy_below: float = 0.5, longest: float = 240.0) -> float:
    """Wait until the host's CPUs are less than `busy_below` busy (the guests have booted),
    sampled over 5 s, or over `longest` when that is shorter (the smallest runs, in tests);
    the seconds waited (at most `longest`)."""
    began = time.monotonic()
    cores = os.cpu_count() or 1
    window = min(5.0, longest)
    while time.monotonic() - began < longest:
        before = host_cpu_seconds()
        await asyncio.sleep(window)
        if (host_cpu_seconds() - before) / (window * cores) < busy_below:
            break
    return time.monotonic() - began


async def pause_latencies(
    watcher: Watcher,
    names: list[str],
    socket_of: Callable[[str], Path],
    sent: dict[str, tuple[float, float]] | None = None,
) -> list[float]:
    """Pause each guest through its launcher socket (as the pause subresource would), timed
    until the watch sees the Paused condition; unpause it again. `sent` gets each name's
    (request sent, Paused seen) on the monotonic clock."""
    out = []
    for name in names:
        sock = socket_of(name)
        watcher.paused.pop(name, None)  # an earlier round's
        started = time.monotonic()
        async with RpcClient.connect(sock) as client:
            await client.call(str(Method.PAUSE), {}, tier=TIERS[Method.PAUSE])
        await watcher.until(functools.partial(operator.contains, watcher.paused, name), 30)
        out.append(watcher.paused[name] - started)
        if sent is not None:
            sent[name] = (started, watcher.paused[name])
        async with RpcClient.connect(sock) as client:
            await client.call(str(Method.UNPAUSE), {}, tier=TIERS[Method.UNPAUSE])
    return out


async def delete_all(kube: KubeClient, *, keep: str = "", timeout: float = 300) -> int:
    """Delete the benchmark's VMIs (all but `keep`) and wait until they are gone; how many
    were deleted."""
    deleted = 0
    for item in (await kube.list(VMIS, namespace=NAMESPACE)).items:
        if item["metadata"]["name"] != keep:
            with contextlib.suppress(NotFound):
                await kube.delete(VMIS, item["metadata"]["name"], namespace=NAMESPACE)
                deleted += 1

    async def gone() -> bool:
        left = (await kube.list(VMIS, namespace=NAMESPACE)).items
        return len(left) == (1 if keep else 0)

    with contextlib.suppress(AssertionError):
        await until_async(gone, "benchmark VMIs deleted", timeout=timeout, interval=0.25)
    return deleted


async def migrate_last(
    kube: KubeClient, *, keep: str, handler_logs: Sequence[Callable[[], str]]
) -> None:
    """(e): delete all VMIs but `keep`, then migrate it through the cluster with a VMIM; the
    guest downtime is what the source handler logged (migration_source_finished)."""
    if await delete_all(kube, keep=keep, timeout=600):
        await asyncio.sleep(5)  # let the deleted guests' QEMUs and their pods go
    body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": "bench-migration"},
        "spec": {"vmiName": keep},
    }
    started = time.monotonic()
    await kube.create(VMIMS, body, namespace=NAMESPACE)
    phase: MigrationPhase | None = MigrationPhase.PENDING
    async with asyncio.timeout(300):
        while phase is None or not phase.is_final():
            await asyncio.sleep(0.05)
            raw = await kube.get(VMIMS, "bench-migration", namespace=NAMESPACE)
            phase = VirtualMachineInstanceMigration.from_dict(raw).status.phase
    took = time.monotonic() - started
    downtime = "?"
    for log in handler_logs:
        for line in log().splitlines():
            if "migration_source_finished" in line and (m := DOWNTIME.search(line)):
                downtime = m.group(1)
    print(f"(e) migration through the cluster ({keep}, VMIM): {phase}")
    print(f"    VMIM created -> {phase} {took:.2f} s, guest downtime {downtime} ms (libvirt)")
    print("    (KubeVirt: up to 900 ms downtime)")


def report_start(rate: float, latencies: list[float], *, what: str = "create -> Running") -> None:
    p50, p95 = pct(latencies, 0.5), pct(latencies, 0.95)
    print(f"(a) {what}, {len(latencies)} VMIs at {rate}/s")
    print(f"    P50 {p50:.2f} s  P95 {p95:.2f} s  max {max(latencies, default=float('nan')):.2f} s")
    print(
        f"    targets P50 <= 2 s, P95 <= 4 s: {'ok' if p50 <= 2 and p95 <= 4 else 'MISSED'}"
        "   (KubeVirt: P50 17 s, P95 28 s on real clusters)"
    )


def report_pauses(pauses: list[float]) -> None:
    e50, e95 = pct(pauses, 0.5) * 1e3, pct(pauses, 0.95) * 1e3
    print(f"(b) domain event -> VMI status (pause via launcher socket, {len(pauses)} samples)")
    print(
        f"    P50 {e50:.0f} ms  P95 {e95:.0f} ms  (target P95 <= 200 ms): "
        f"{'ok' if e95 <= 200 else 'MISSED'}"
    )


def report_writes(api: tuple[Mapping[str, float], Mapping[str, float]], vmis: int) -> None:
    n = max(1, vmis)
    print(f"(c) API writes per VMI (kube-apiserver counters, creation included, {n} VMIs)")
    for key in api[1]:
        delta = api[1][key] - api[0].get(key, 0.0)
        if delta:
            print(f"    {key:32s} {delta / n:5.2f}")
    print("    (KubeVirt: ~2.2 pod PATCH + 5.4 VMI UPDATE + 0.9 VMI PATCH)")
