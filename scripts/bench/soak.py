"""scripts/soak: N minutes (default 30) of VM churn on a private real-node cluster, with the
daemons' resident memory and open files sampled every minute (docs/soak.md).

The cluster is the benches' (localkube.testing.session_cluster(NodeKind.KUBELET): 2 nodes
of kubelet + containerd + runc, images built and imported, kubevirt-py deployed from
manifests/overlays/local). The churn: waves of `--vms` VMIs (examples/vmi-tiny.yaml, the
real TCG guest) created, each wave waited Running, then deleted and waited gone, again
until the time is up. Every `--interval` seconds each virt-handler, virt-controller and
kubelet of this cluster is sampled (soak_sampler.py). Printed: the table of samples, each
daemon's mean over the first and the last `--window` minutes, and the verdict, "flat"
when every daemon's last window is within `--margin` (plus a small slack) of its first.

Stopped by SIGTERM/SIGINT/SIGHUP, it prints what it sampled and tears the cluster down
(localkube/stopping.py). Not part of the suite: a report, it exits 0 either way.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import soak_memtrace
import uvloop
from handler_common import vmi_body
from soak_sampler import DaemonSampler, Sample, table, verdicts

from localkube.cluster import Cluster
from localkube.config import NodeKind
from localkube.deploy import Kubectl, deploy
from localkube.stopping import Interrupted
from localkube.testing import session_cluster
from shared.kube import VMIS, ClientConfig, KubeClient, NotFound, Registry
from shared.kube.errors import AlreadyExists, ServerError, TransportError
from tests.integration.controller.harness import NAMESPACES

NAMESPACE = "soak"


@dataclass
class Churn:
    """What the churn has done so far."""

    cycles: int = 0
    vmis: int = 0
    failed: list[str] = field(default_factory=list)  # VMIs not Running within the timeout
    create_retries: int = 0  # creates refused by a transient API failure, then retried


async def _phases(kube: KubeClient) -> dict[str, str]:
    items = (await kube.list(VMIS, namespace=NAMESPACE)).items
    return {i["metadata"]["name"]: i.get("status", {}).get("phase", "") for i in items}


async def _until(probe: Callable[[], Awaitable[bool]], timeout: float) -> bool:
    """Poll `probe` every second until true or `timeout`; whether it came true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await probe():
            return True
        await asyncio.sleep(1)
    return False


async def _create(kube: KubeClient, churned: Churn, name: str, *, patience: float = 120) -> None:
    """Create one VMI; a transient API failure (a webhook not answering while a daemon
    restarts, a 5xx, a dropped connection) is retried for `patience` seconds and counted."""
    deadline = time.monotonic() + patience
    while True:
        try:
            await kube.create(VMIS, vmi_body(name), namespace=NAMESPACE)
            return
        except AlreadyExists:  # an earlier attempt that timed out had reached the server
            return
        except (ServerError, TransportError):
            churned.create_retries += 1
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(2)


async def _wave(kube: KubeClient, churned: Churn, names: list[str], *, timeout: float) -> None:
    """Create `names`, wait for them Running, delete them, wait until they are gone."""
    for name in names:
        await _create(kube, churned, name)

    async def running() -> bool:
        phases = await _phases(kube)
        return all(phases.get(n) == "Running" for n in names)

    if not await _until(running, timeout):
        phases = await _phases(kube)
        churned.failed += [f"{n}: {phases.get(n)}" for n in names if phases.get(n) != "Running"]
    for name in names:
        with contextlib.suppress(NotFound):
            await kube.delete(VMIS, name, namespace=NAMESPACE)

    async def gone() -> bool:
        return not set(names) & set(await _phases(kube))

    await _until(gone, timeout)


async def churn(kube: KubeClient, churned: Churn, *, vms: int, timeout: float) -> None:
    """Waves of `vms` VMIs: created, Running, deleted, gone; until cancelled."""
    while True:
        names = [f"soak-{churned.cycles:04d}-{i}" for i in range(vms)]
        await _wave(kube, churned, names, timeout=timeout)
        churned.cycles += 1
        churned.vmis += vms


async def sample_every(
    sampler: DaemonSampler, samples: list[Sample], cycles: dict[float, int], churned: Churn,
    *, interval: float, began: float, traced: bool,
) -> None:  # fmt: skip
    """A sample now and every `interval` seconds, until cancelled (and, `traced`, each
    traced daemon asked for its memory_snapshot)."""
    while True:
        minute = round((time.monotonic() - began) / 60, 1)
        samples.append(await asyncio.to_thread(sampler.sample, minute))
        if traced:
            soak_memtrace.ask(samples[-1])
        cycles[minute] = churned.cycles
        print(f"    sampled at {minute:.1f} min ({churned.cycles} churn cycles)", flush=True)
        await asyncio.sleep(interval)


async def soak(cluster: Cluster, args: argparse.Namespace, out: list[Sample]) -> None:
    fleet = cluster.fleet()
    roots = {fleet.node(n).layout.cgroup_root: n for n in cluster.config.nodes}
    sampler = DaemonSampler(cgroup_roots=roots, nodes_dir=cluster.config.nodes_dir)
    cycles: dict[float, int] = {}
    churned = Churn()
    config = ClientConfig(kubeconfig=cluster.kubeconfig, user_agent="soak")
    async with await KubeClient.connect(config, registry=Registry()) as kube:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        await kube.create(NAMESPACES, body)
        began = time.monotonic()
        try:
            async with asyncio.timeout(args.minutes * 60), asyncio.TaskGroup() as tg:
                tg.create_task(churn(kube, churned, vms=args.vms, timeout=args.vmi_timeout))
                tg.create_task(sample_every(sampler, out, cycles, churned,
                                            interval=args.interval, began=began,
                                            traced=args.tracemalloc > 0))  # fmt: skip
        except TimeoutError:
            pass
        finally:  # also when a stop signal cuts the run short: what was sampled so far
            minute = round((time.monotonic() - began) / 60, 1)
            if not out or out[-1].minute != minute:
                out.append(sampler.sample(minute))
                cycles[minute] = churned.cycles
            report(out, cycles, churned, sampler, args)


def report(
    samples: list[Sample], cycles: dict[float, int], churned: Churn, sampler: DaemonSampler,
    args: argparse.Namespace,
) -> None:  # fmt: skip
    print()
    print("RSS MiB / open files per daemon:")
    print(table(samples, cycles))
    print(f"\nchurn: {churned.cycles} waves, {churned.vmis} VMIs created and deleted; "
          f"not Running in {args.vmi_timeout:g} s: {len(churned.failed)}")  # fmt: skip
    if churned.create_retries:
        print(f"creates retried after a transient API failure: {churned.create_retries}")
    for line in churned.failed[:10]:
        print(f"    {line}")
    if sampler.restarts:
        print(f"restarts: {sampler.restarts}")
    window = min(args.window, max(samples[-1].minute / 3, 0.1)) if samples else args.window
    found = verdicts(samples, window=window, margin=args.margin, rss_slack=args.rss_slack,
                     fd_slack=args.fd_slack)  # fmt: skip
    print(f"\nfirst vs last {window:.1f} min (means), margin {args.margin:.0%} "
          f"+ {args.rss_slack:g} MiB / {args.fd_slack:g} files:")  # fmt: skip
    for v in found:
        print(f"    {v.name:28s} RSS {v.rss_first:7.1f} -> {v.rss_last:7.1f} MiB   "
              f"files {v.fds_first:6.1f} -> {v.fds_last:6.1f}   {'flat' if v.flat else 'GROWING'}")  # fmt: skip
    flat = bool(found) and all(v.flat for v in found) and not sampler.restarts
    print(f"verdict: {'flat' if flat else 'not flat'}")
    sys.stdout.flush()


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--minutes", type=float, default=30.0, help="how long the churn runs")
    p.add_argument("--vms", type=int, default=3, help="VMIs per churn wave")
    p.add_argument("--interval", type=float, default=60.0, help="seconds between samples")
    p.add_argument("--window", type=float, default=10.0, help="minutes compared, first vs last")
    p.add_argument("--margin", type=float, default=0.10, help="allowed growth (fraction)")
    p.add_argument("--rss-slack", type=float, default=4.0, help="MiB allowed beyond the margin")
    p.add_argument("--fd-slack", type=float, default=4.0, help="files allowed beyond the margin")
    p.add_argument("--vmi-timeout", type=float, default=300.0, help="per wave, Running / gone")
    p.add_argument("--tracemalloc", type=int, default=0, metavar="FRAMES",
                   help="restart the controller and handlers tracing N frames per allocation, "
                        "and print their snapshots' growth (soak_memtrace.py); 0: off")  # fmt: skip
    args = p.parse_args()
    print(f"kubevirt-py soak ({os.cpu_count()} cores, TCG guest, {args.minutes:g} min of "
          f"churn, {args.vms} VMIs a wave, a sample every {args.interval:g} s)", flush=True)  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    began = time.monotonic()
    samples: list[Sample] = []
    try:
        with session_cluster(NodeKind.KUBELET) as cluster:
            kubectl = Kubectl(cluster.config.bin_dir / "kubectl", cluster.kubeconfig)
            deploy(kubectl, certs=work / "certs", real_nodes=True, timeout=300)
            print(f"    (cluster and deployment ready in {time.monotonic() - began:.0f} s)",
                  flush=True)  # fmt: skip
            if args.tracemalloc:
                soak_memtrace.enable(kubectl, frames=args.tracemalloc)
            try:
                uvloop.run(soak(cluster, args, samples))
            finally:
                if args.tracemalloc:
                    soak_memtrace.report(kubectl)
    except Interrupted as stopped:
        print(f"soak {stopped} after {len(samples)} samples (the verdict above covers only "
              "them); its cluster is gone", file=sys.stderr)  # fmt: skip
        raise SystemExit(128 + stopped.signum) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the deployment's certificates and keys


if __name__ == "__main__":
    main()
