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


# Tracing makes every allocation slower and larger: a traced controller misses its 1 s
# liveness probe under churn on 2 cores and is restarted (which resets what the soak
# measures), and a traced handler's trace tables approach its 384Mi limit. While traced,
# the probes wait longer and the memory limits are raised (RSS then includes the tables);
# the controller's lease is longer too (enable()).
_PROBE_WHILE_TRACED = {"timeoutSeconds": 15, "failureThreshold": 10, "periodSeconds": 20}
_LIMITS_WHILE_TRACED = {"memory": "2Gi"}


def _relax(kubectl: Kubectl, workload: str) -> None:
    kind, name = workload.split("/")
    spec = json.loads(
        kubectl("get", "-n", NAMESPACE, workload, "-o", "jsonpath={.spec.template.spec}")
    )
    patch = []
    for i, container in enumerate(spec["containers"]):
        base = f"/spec/template/spec/containers/{i}"
        for probe in ("livenessProbe", "readinessProbe"):
            if probe in container:
                for key, value in _PROBE_WHILE_TRACED.items():
                    patch.append({"op": "add", "path": f"{base}/{probe}/{key}", "value": value})
        if "resources" in container and "limits" in container["resources"]:
            patch.append({"op": "add", "path": f"{base}/resources/limits",
                          "value": _LIMITS_WHILE_TRACED})  # fmt: skip
    if patch:
        kubectl("patch", "-n", NAMESPACE, kind, name, "--type=json", "-p", json.dumps(patch))


def enable(kubectl: Kubectl, *, frames: int) -> None:
    """The controller and handlers restarted with tracemalloc on (probes and memory limits
    relaxed for the tracing's cost), and rolled out."""
    for workload in WORKLOADS:
        _relax(kubectl, workload)
    kubectl("set", "env", "-n", NAMESPACE, *WORKLOADS, f"PYTHONTRACEMALLOC={frames}")
    # A traced controller stalled past its 10 s renew deadline under churn and lost its
    # lease (it exits then, and a restart resets what the soak measures): 60 s leases
    # (renew deadline 40 s) while traced.
    kubectl("set", "env", "-n", NAMESPACE, WORKLOADS[0], "VIRT_CONTROLLER_LEASE_SECONDS=60")
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
