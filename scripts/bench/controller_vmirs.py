"""The controller benchmark's VMIRS row (issue 23): a VirtualMachineInstanceReplicaSet
scaled 0 → N through its scale subresource (as `kubectl scale` does), timed from the scale
call until N of its VMIs are Scheduled, with the controller's CPU per VMI; printed against
the ReplicaSet of N pods of the same run (the same floor as the VMI row)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller_floor import TARGET_RATIO

from shared.kube import VMIRSS, VMIS, KubeClient, NotFound

NAME = "bench-vmirs"
LABEL = "kubevirt-py.bench/vmirs"


@dataclass(frozen=True, slots=True)
class VmirsRun:
    n: int
    wall: float  # scale call → N members Scheduled
    cpu_s: float  # the controller's user+system CPU over that time


def vmirs_body() -> dict[str, Any]:
    labels = {LABEL: NAME}
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceReplicaSet",
        "metadata": {"name": NAME},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"domain": {"memory": {"guest": "64Mi"}, "devices": {}}},
            },
        },
    }


async def vmirs_scale(
    kube: KubeClient, ns: str, n: int, *, cpu: Callable[[], float], timeout: float
) -> VmirsRun:
    """Create the set at 0, scale it to `n`, wait for `n` members Scheduled."""
    await kube.create(VMIRSS, vmirs_body(), namespace=ns)
    selector = f"{LABEL}={NAME}"
    rv = (await kube.list(VMIS, namespace=ns, label_selector=selector)).resource_version
    seen: set[str] = set()
    async with asyncio.timeout(timeout), asyncio.TaskGroup() as tg:
        watcher = tg.create_task(_watch_scheduled(kube, ns, rv, seen=seen, n=n))
        cpu_before, began = cpu(), time.monotonic()
        await kube.patch(VMIRSS, NAME, {"spec": {"replicas": n}}, namespace=ns,
                         subresource="scale")  # fmt: skip
        await watcher
    wall = time.monotonic() - began
    return VmirsRun(n=n, wall=wall, cpu_s=cpu() - cpu_before)


async def _watch_scheduled(kube: KubeClient, ns: str, rv: str, *, seen: set[str], n: int) -> None:
    while len(seen) < n:
        stream = kube.watch(VMIS, namespace=ns, resource_version=rv,
                            label_selector=f"{LABEL}={NAME}")  # fmt: skip
        async with contextlib.aclosing(stream):
            async for event in stream:
                rv = event.resource_version or rv
                obj = event.object
                if (obj.get("status") or {}).get("phase") in ("Scheduled", "Running"):
                    seen.add(str((obj.get("metadata") or {}).get("uid")))
                    if len(seen) >= n:
                        return


async def delete_vmirs(kube: KubeClient, ns: str) -> None:
    """The set (its members go with the namespace's cleanup)."""
    with contextlib.suppress(NotFound):
        await kube.delete(VMIRSS, NAME, namespace=ns)


def report_vmirs(run: VmirsRun, rs_wall: float | None) -> None:
    cpu_ms = run.cpu_s * 1000 / run.n
    line = (
        f"  VMIRS scaled 0 → {run.n}: all Scheduled {run.wall:.1f} s, controller CPU "
        f"{run.cpu_s:.2f} s = {cpu_ms:.2f} ms per VMI"
    )
    if rs_wall:
        ratio = run.wall / rs_wall
        ok = "ok" if ratio <= TARGET_RATIO else "OVER TARGET"
        line += (
            f"; vs a ReplicaSet of {run.n} pods {rs_wall:.1f} s -> {ratio:.2f}x "
            f"(target <= {TARGET_RATIO:g}x, {ok})"
        )
    print(line)
