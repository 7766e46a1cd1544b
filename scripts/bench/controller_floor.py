"""The controller benchmark's floors and its paced mode (issue 14, item 4).

- Kubernetes' own floor: a ReplicaSet of the same number of pods on the same cluster and
  the same fake nodes, timed from its create call until every pod is bound to a node (the
  ReplicaSet controller's creates, the scheduler's bindings): the VMI path does the same
  work plus the VMI's own writes (create, the controller's launcher pod, the Scheduled
  status), so "all VMIs Scheduled" against "all pods bound" is our cost over Kubernetes'.
- Paced mode (KubeVirt's density-test shape): N VMIs created at R per second, each timed
  from its create call to Scheduled seen on a watch; P50 / P95 / P99.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

from controller_fakenodes import FAKE_LABEL

from shared.kube import PODS, DeleteOptions, KubeClient, NotFound, Resource

REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet")
RS_NAME = "bench-floor"
RS_LABEL = "kubevirt-py.bench/replicaset"
TARGET_RATIO = 1.2
TARGET_PACED_P99 = 2.0


def replicaset_body(n: int) -> dict[str, Any]:
    """N pods that only the fake nodes may run (their stand-in kubelet marks them Running)."""
    labels = {RS_LABEL: RS_NAME}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": RS_NAME, "labels": labels},
        "spec": {
            "replicas": n,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {FAKE_LABEL: "true"},
                    "containers": [{"name": "pause", "image": "registry.local/pause:bench"}],
                    "terminationGracePeriodSeconds": 0,
                },
            },
        },
    }


async def replicaset_all_bound(kube: KubeClient, ns: str, n: int, *, timeout: float) -> float:
    """Seconds from the ReplicaSet's create call until `n` of its pods have a node."""
    selector = f"{RS_LABEL}={RS_NAME}"
    rv = (await kube.list(PODS, namespace=ns, label_selector=selector)).resource_version
    bound: set[str] = set()
    async with asyncio.timeout(timeout), asyncio.TaskGroup() as tg:
        watcher = tg.create_task(_watch_bound(kube, ns, rv, bound=bound, n=n))
        began = time.monotonic()
        await kube.create(REPLICASETS, replicaset_body(n), namespace=ns)
        await watcher
    return time.monotonic() - began


async def _watch_bound(kube: KubeClient, ns: str, rv: str, *, bound: set[str], n: int) -> None:
    while len(bound) < n:
        stream = kube.watch(
            PODS, namespace=ns, resource_version=rv, label_selector=f"{RS_LABEL}={RS_NAME}"
        )
        async with contextlib.aclosing(stream):
            async for event in stream:
                rv = event.resource_version or rv
                pod = event.object
                if (pod.get("spec") or {}).get("nodeName"):
                    bound.add(str((pod.get("metadata") or {}).get("uid")))
                    if len(bound) >= n:
                        return


async def delete_replicaset(kube: KubeClient, ns: str) -> None:
    """The ReplicaSet and (its pods never terminate on fake nodes) its pods, at once."""
    with contextlib.suppress(NotFound):
        await kube.delete(REPLICASETS, RS_NAME, namespace=ns)
    listed = await kube.list_all(PODS, namespace=ns, label_selector=f"{RS_LABEL}={RS_NAME}")
    for pod in listed.items:
        with contextlib.suppress(NotFound):
            await kube.delete(
                PODS,
                pod["metadata"]["name"],
                namespace=ns,
                options=DeleteOptions(grace_period_seconds=0),
            )


async def create_paced(
    n: int, rate: float, one: Callable[[int], Awaitable[None]], *, concurrency: int = 200
) -> None:
    """Call `one(i)` for i < n, the i-th no earlier than i / rate seconds after the first
    (late calls are not bunched up to catch up: each keeps its own slot)."""
    limit = asyncio.Semaphore(concurrency)
    began = time.monotonic()

    async def slot(i: int) -> None:
        await asyncio.sleep(max(0.0, began + i / rate - time.monotonic()))
        async with limit:
            await one(i)

    async with asyncio.TaskGroup() as tg:
        for i in range(n):
            tg.create_task(slot(i))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def report_floor(vmis_wall: float, rs_wall: float, n: int) -> None:
    ratio = vmis_wall / rs_wall if rs_wall else float("nan")
    ok = "ok" if ratio <= TARGET_RATIO else "OVER TARGET"
    print(
        f"  time to all bound, {n} at once: VMIs (all Scheduled) {vmis_wall:.1f} s vs a "
        f"ReplicaSet of {n} pods (all bound) {rs_wall:.1f} s -> {ratio:.2f}x "
        f"(target <= {TARGET_RATIO:g}x, {ok})"
    )


def report_paced(latencies: list[float], rate: float) -> None:
    p99 = pct(latencies, 0.99)
    ok = "ok" if p99 <= TARGET_PACED_P99 else "OVER TARGET"
    print(
        f"  paced, {len(latencies)} VMIs at {rate:g}/s: create -> Scheduled "
        f"P50 {pct(latencies, 0.5):.3f} s  P95 {pct(latencies, 0.95):.3f} s  "
        f"P99 {p99:.3f} s  max {max(latencies):.3f} s "
        f"(target P99 <= {TARGET_PACED_P99:g} s, {ok})"
    )
