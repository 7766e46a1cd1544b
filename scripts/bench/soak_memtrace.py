"""scripts/soak --tracemalloc N: the controller's and handlers' own account of their memory.

The daemons are restarted with `PYTHONTRACEMALLOC=N` (N frames per allocation traced), and
at every sample each virt-controller and virt-handler gets SIGUSR2: it logs one
`memory_snapshot` event (shared/memtrace.py) with its traced total and, from the second on,
the allocation sites grown most since its first. At the end the events are read back from
the pods' logs and printed: per daemon, traced KiB first → last, and the last snapshot's
top growth. Tracing costs the daemons CPU and memory (their RSS rises by the trace
tables): compare RSS runs with runs without it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from typing import Any

from soak_sampler import Sample

from localkube.deploy import NAMESPACE, Kubectl

WORKLOADS = ("deployment/virt-controller", "daemonset/virt-handler")
TRACED_ROLES = ("virt-controller", "virt-handler")


def enable(kubectl: Kubectl, *, frames: int) -> None:
    """The controller and handlers restarted with tracemalloc on, and rolled out."""
    kubectl("set", "env", "-n", NAMESPACE, *WORKLOADS, f"PYTHONTRACEMALLOC={frames}")
    for workload in WORKLOADS:
        kubectl("rollout", "status", "-n", NAMESPACE, workload, "--timeout=300s", timeout=330)
    # The rollout is done when the new pods are ready; the old ones may still be stopping,
    # and the sampler would count a stopping daemon's pid as a second one (a "restart").
    deadline = time.monotonic() + 300
    while kubectl(
        "get", "pods", "-n", NAMESPACE, "-l", "kubevirt.io in (virt-controller,virt-handler)",
        "-o", "jsonpath={.items[*].metadata.deletionTimestamp}", check=False,
    ).strip():  # fmt: skip
        if time.monotonic() > deadline:
            raise SystemExit("soak: the daemons' old pods were still stopping after 300 s")
        time.sleep(2)


def ask(sample: Sample) -> None:
    """SIGUSR2 to every traced daemon of this sample (a gone pid is skipped)."""
    for name, reading in sample.readings.items():
        if name.startswith(TRACED_ROLES):
            with contextlib.suppress(ProcessLookupError):
                os.kill(reading.pid, signal.SIGUSR2)


def _snapshots(kubectl: Kubectl, pod: str) -> list[dict[str, Any]]:
    found = []
    for line in kubectl("logs", "-n", NAMESPACE, pod, check=False).splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict) and event.get("event") == "memory_snapshot":
                found.append(event)
    return found


def report(kubectl: Kubectl, *, top: int = 10) -> None:
    """Each traced pod's snapshots: traced KiB first → last, and where it grew."""
    pods = kubectl(
        "get", "pods", "-n", NAMESPACE, "-o", "name", "-l", "kubevirt.io in (virt-controller,virt-handler)",
        check=False,
    ).split()  # fmt: skip
    print("\ntracemalloc (the daemons' own snapshots, SIGUSR2 at each sample):")
    for pod in pods:
        snaps = [s for s in _snapshots(kubectl, pod) if "traced_kib" in s]
        if not snaps:
            print(f"    {pod}: no traced snapshot in its log")
            continue
        first, last = snaps[0], snaps[-1]
        print(f"    {pod}: {len(snaps)} snapshots, traced {first['traced_kib']} -> "
              f"{last['traced_kib']} KiB, RSS {first['rss_kib']} -> {last['rss_kib']} KiB")  # fmt: skip
        for line in (last.get("grew") or [])[:top]:
            print(f"        {line}")
