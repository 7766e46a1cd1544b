"""Controller benchmark: N VMIs created at once (or paced, --rate), against the real control
plane, beside Kubernetes' own floor: a ReplicaSet of N pods on the same cluster.

Starts a private local cluster (or uses --kubeconfig), installs the CRDs, registers fake
nodes with a stand-in kubelet (scripts/bench/controller_fakenodes.py) so launcher pods
"run" without processes, starts `python -m controller` scoped to a fresh namespace, then
creates N VMIs concurrently and prints:
- create → Scheduled latency P50 / P95 / max (create call issued → Scheduled seen on a watch);
- API requests per VMI by resource and verb, from kube-apiserver's own
  apiserver_request_total (so every writer counts: the benchmark's creates, the
  controller, the scheduler's bindings, the stand-in kubelet), and the controller's share
  from its own kubevirt_rest_client_requests_total;
- controller RSS per VMI held (RSS with N VMIs Scheduled minus RSS before, / N) and CPU
  per VMI (user + system time spent during the burst, / N), against the targets;
- time to all bound for the VMIs and for a ReplicaSet of N pods, and the ratio
  (controller_floor.py); with --rate R, create → Scheduled P50 / P95 / P99 instead;
- a VirtualMachineInstanceReplicaSet scaled 0 → N (controller_vmirs.py): time to all its
  members Scheduled against the same ReplicaSet, and the controller's CPU per VMI.
A report, not a test: exits 0 unless the run itself fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import uvloop

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from controller_fakenodes import FakeNodes
from controller_floor import create_paced, delete_replicaset, replicaset_all_bound
from controller_report import ProcSample, Run, Tally, report
from controller_vmirs import delete_vmirs, report_vmirs, vmirs_scale

from localkube.testing import session_cluster
from shared.kube import (
    VMIS,
    ClientConfig,
    KubeClient,
    NotFound,
    RateLimit,
    Registry,
    Resource,
)

WEBHOOKS = (
    ("mutatingwebhookconfiguration", "virt-api-mutator"),
    ("validatingwebhookconfiguration", "virt-api-validator"),
)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
PODS_PER_FAKE_NODE = 300
_SAMPLE = re.compile(r"^(\w+)(?:\{(.*)\})? ([0-9.eE+-]+|NaN|[+-]Inf)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def proc_sample(pid: int) -> ProcSample:
    """VmRSS and user+system CPU of a process, from /proc."""
    rss = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return ProcSample(rss_kb=rss, cpu_s=(int(fields[11]) + int(fields[12])) / ticks)


def kubectl(kubeconfig: Path, *args: str) -> str:
    proc = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {proc.stderr or proc.stdout}")
    return proc.stdout


def parse_samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Every sample of metric `name` as (labels, value)."""
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m.group(1) == name:
            out.append((dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def delta(after: Tally, before: Tally) -> Tally:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0)}


def apiserver_requests(kubeconfig: Path) -> Tally:
    """apiserver_request_total by (resource, subresource, verb) for pods and VMIs."""
    text = kubectl(kubeconfig, "get", "--raw", "/metrics")
    counts: Tally = {}
    for labels, value in parse_samples(text, "apiserver_request_total"):
        if labels.get("resource") in ("pods", "virtualmachineinstances"):
            key = (labels["resource"], labels.get("subresource", ""), labels.get("verb", ""))
            counts[key] = counts.get(key, 0.0) + value
    return counts


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ControllerUnderTest:
    """`python -m controller` for one namespace, with its /metrics."""

    def __init__(self, kubeconfig: Path, namespace: str, log: Path) -> None:
        self.port = free_port()
        self.log = log
        # KVPY_BENCH_PROFILE=out.txt: the controller runs under pyinstrument (see
        # controller_profile.py) and its report is written there.
        profile = os.environ.get("KVPY_BENCH_PROFILE")
        script = str(Path(__file__).with_name("controller_profile.py"))
        runner = [script, profile] if profile else ["-m", "controller"]
        self.argv = [
            sys.executable, *runner,
            "--kubeconfig", str(kubeconfig),
            "--namespace", namespace,
            "--leader-namespace", namespace,
            "--port", str(self.port),
            "--log-format", "json",
            "--container-disk-delivery", "Copy",  # process-mode nodes: no image volumes
        ]  # fmt: skip
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> int:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, stdout=out, stderr=subprocess.STDOUT, env=env
            )
        async with asyncio.timeout(120):
            while await self.metric("kubevirt_virt_controller_leading_status") != 1.0:
                if self.proc.returncode is not None:
                    raise RuntimeError(f"controller exited; see {self.log}")
                await asyncio.sleep(0.2)
        return self.proc.pid

    async def metrics(self) -> str:
        try:
            async with (
                asyncio.timeout(10),
                aiohttp.ClientSession() as s,
                s.get(f"http://127.0.0.1:{self.port}/metrics") as r,
            ):
                return await r.text()
        except (aiohttp.ClientError, TimeoutError, OSError):
            return ""

    async def metric(self, name: str) -> float:
        return sum(v for _, v in parse_samples(await self.metrics(), name))

    async def writes(self) -> Tally:
        """The controller's own requests by (resource, verb)."""
        counts: Tally = {}
        text = await self.metrics()
        for labels, value in parse_samples(text, "kubevirt_rest_client_requests_total"):
            key = (labels["resource"], labels["verb"])
            counts[key] = counts.get(key, 0.0) + value
        return counts

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(20):
                    await self.proc.wait()
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()


def vmi_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": name},
        "spec": {"domain": {"memory": {"guest": "64Mi"}, "devices": {}}},
    }


async def watch_scheduled(
    kube: KubeClient, ns: str, rv: str, seen: dict[str, float], n: int
) -> None:
    """Record when each VMI is first seen Scheduled, until `n` are."""
    while len(seen) < n:
        stream = kube.watch(VMIS, namespace=ns, resource_version=rv)
        async with contextlib.aclosing(stream):
            async for event in stream:
                rv = event.resource_version or rv
                obj = event.object
                name = (obj.get("metadata") or {}).get("name")
                phase = (obj.get("status") or {}).get("phase")
                if name and name not in seen and phase in ("Scheduled", "Running"):
                    seen[name] = time.monotonic()
                    if len(seen) >= n:
                        return


async def create_all(
    kube: KubeClient, ns: str, n: int, issued: dict[str, float], *, rate: float | None
) -> None:
    """All at once (200 in flight), or paced at `rate` per second."""

    async def one(i: int) -> None:
        name = f"bench-{i:05d}"
        issued[name] = time.monotonic()
        await kube.create(VMIS, vmi_body(name), namespace=ns)

    await create_paced(n, rate or math.inf, one)


async def bench(kubeconfig: Path, n: int, workdir: Path, opts: Options) -> Run:
    client_cfg = ClientConfig(
        kubeconfig=kubeconfig,
        rate_limit=RateLimit(qps=2000, burst=2000),
        user_agent="bench-controller",
    )
    kube = await KubeClient.connect(client_cfg, registry=Registry())
    async with kube:
        ns = f"bench-controller-{uuid.uuid4().hex[:6]}"
        await kube.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
        nodes = FakeNodes(
            kube,
            ns,
            # VMIs + RS (+ VMIRS members)
            count=max(1, math.ceil((3 if opts.vmirs else 2) * n / (PODS_PER_FAKE_NODE * 0.8))),
            pods_per_node=PODS_PER_FAKE_NODE,
        )
        await nodes.create()
        ctl = ControllerUnderTest(kubeconfig, ns, workdir / "controller.log")
        try:
            async with asyncio.TaskGroup() as tg:
                kubelet = tg.create_task(nodes.run())
                pid = await ctl.start()
                await asyncio.sleep(2)
                target = Target(kubeconfig, pid, ns, nodes.count)
                run = await measure(kube, ctl, target, n, rate=opts.rate)
                if opts.replicaset:
                    run.replicaset_wall = await replicaset_all_bound(kube, ns, n, timeout=1800)
                    await delete_replicaset(kube, ns)
                if opts.vmirs:
                    cpu = lambda: proc_sample(pid).cpu_s  # noqa: E731
                    run.vmirs = await vmirs_scale(kube, ns, n, cpu=cpu, timeout=1800)
                    await delete_vmirs(kube, ns)
                kubelet.cancel()
            return run
        finally:
            await ctl.stop()
            await cleanup(kube, ns, nodes)


@dataclass(frozen=True, slots=True)
class Options:
    rate: float | None  # VMIs per second; None: all at once
    replicaset: bool  # also time Kubernetes' floor, a ReplicaSet of as many pods
    vmirs: bool = False  # also scale a VMIRS 0 → N


@dataclass(frozen=True, slots=True)
class Target:
    """What is measured: the cluster, the controller process, its namespace, fake nodes."""

    kubeconfig: Path
    pid: int
    namespace: str
    fake_nodes: int


async def measure(
    kube: KubeClient, ctl: ControllerUnderTest, target: Target, n: int, *, rate: float | None
) -> Run:
    ns = target.namespace
    api_before = await asyncio.to_thread(apiserver_requests, target.kubeconfig)
    mine_before = await ctl.writes()
    before = proc_sample(target.pid)
    issued: dict[str, float] = {}
    seen: dict[str, float] = {}
    rv = (await kube.list(VMIS, namespace=ns)).resource_version
    start = time.monotonic()
    async with asyncio.TaskGroup() as tg:
        watcher = tg.create_task(watch_scheduled(kube, ns, rv, seen, n))
        await create_all(kube, ns, n, issued, rate=rate)
        async with asyncio.timeout(1800):
            await watcher
    wall = time.monotonic() - start
    await asyncio.sleep(3)  # let trailing writes land before counting
    after = proc_sample(target.pid)
    api = delta(await asyncio.to_thread(apiserver_requests, target.kubeconfig), api_before)
    mine = delta(await ctl.writes(), mine_before)
    latencies = [seen[k] - issued[k] for k in issued]
    return Run(n, latencies, api, mine, before, after, target.fake_nodes, wall, rate)


async def cleanup(kube: KubeClient, ns: str, nodes: FakeNodes) -> None:
    """Leave nothing behind on a shared cluster: finalizers, pods, namespace, fake nodes."""
    for item in (await kube.list_all(VMIS, namespace=ns)).items:
        with contextlib.suppress(NotFound):
            await kube.patch(
                VMIS, item["metadata"]["name"], {"metadata": {"finalizers": None}}, namespace=ns
            )
    await nodes.force_delete_pods()
    with contextlib.suppress(NotFound):
        await kube.delete(NAMESPACES, ns)
    await nodes.delete()


@contextlib.contextmanager
def cluster(kubeconfig: str | None) -> Iterator[Path]:
    """The given cluster, or a private one started for this run and torn down after."""
    if kubeconfig:
        yield Path(kubeconfig)
        return
    with session_cluster() as c:
        yield c.kubeconfig


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vmis", type=int, default=1000, help="VMIs created at once (default 1000)")
    p.add_argument("--rate", type=float, help="paced: VMIs created per second (P50/P95/P99)")
    p.add_argument(
        "--no-replicaset", action="store_true", help="skip the ReplicaSet floor (on by default)"
    )
    p.add_argument(
        "--no-vmirs", action="store_true", help="skip the VMIRS 0 → N row (on by default)"
    )
    p.add_argument("--kubeconfig", help="use this cluster instead of starting a private one")
    args = p.parse_args()
    opts = Options(
        rate=args.rate,
        replicaset=not args.no_replicaset and not args.rate,
        vmirs=not args.no_vmirs and not args.rate,
    )
    with (
        cluster(args.kubeconfig) as kubeconfig,
        tempfile.TemporaryDirectory(prefix="bench-ctl-") as tmp,
    ):
        kubectl(kubeconfig, "apply", "-k", str(REPO / "manifests" / "base"))
        kubectl(kubeconfig, "wait", "--for=condition=established", "--timeout=60s", "crd", "--all")
        # The controller runs here as a host process without virt-api's webhook endpoint:
        # admission is not what this measures (the webhooks would refuse every create).
        for kind, name in WEBHOOKS:
            kubectl(kubeconfig, "delete", kind, name, "--ignore-not-found")
        run = uvloop.run(bench(kubeconfig, args.vmis, Path(tmp), opts))
        report(run)
        if run.vmirs is not None:
            report_vmirs(run.vmirs, run.replicaset_wall)


if __name__ == "__main__":
    main()
