"""Handler benchmark: N VMIs created at R/s on a private 2-node local cluster, real guest (TCG).

`--nodes kubelet` (the default): real nodes (kubelet + containerd + runc per node), kubevirt-py
deployed from manifests/overlays/local; see bench_realnodes.py for what it prints (create ->
Running and -> the guest's boot marker, (b), (c), (e), the host CPU per VMI split by
component, QEMU's boot cost against a bare launcher).

`--nodes process`: process-mode nodes, the controller and one virt-handler-py per node as
host processes. Printed:

(a) create -> Running, P50 / P95 / max (VMI created -> a watch sees phase Running);
(b) domain event -> VMI status, P50 / P95: a sample of guests is paused through their
    launcher sockets (as the pause subresource would), one at a time, timed until a
    watch sees the Paused condition (libvirt's suspend, the event push, the reconcile,
    the status write and the watch delivery); once right after all are Running (guests
    still booting on every core) and once the host has settled;
(c) API writes per VMI, from kube-apiserver's own request counters (VMI and pod writes by
    verb, creation included);
(d) handler RSS per VMI held (both handlers, before vs. all Running);
(e) migration through the cluster: all VMIs but one are deleted, then the last one is
    migrated with a VirtualMachineInstanceMigration; VMIM created -> Succeeded, and the
    guest downtime libvirt measured (from the source handler's migration_source_finished);
(f) migration total time and downtime of the launcher vs a raw libvirt migration between
    the same two daemons, in this run (scripts/bench-migration, two bare launchers).
(e) runs on real nodes too (through the handlers' migration proxy); (f) is process mode only.

A report, not a test: exits 0 whether or not targets are met.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

import uvloop

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench_cluster import process_cluster
from bench_realnodes import run_real_nodes
from handler_common import (
    NAMESPACE,
    Watcher,
    create_paced,
    delete_all,
    host_cpu_seconds,
    migrate_last,
    pause_latencies,
    pct,
    report_pauses,
    report_start,
    report_writes,
    settle,
    writes,
)

from localkube.cluster import Cluster
from localkube.config import NodeKind
from shared.kube import ClientConfig, KubeClient, Registry
from tests.integration.controller.harness import NAMESPACES, ControllerProcess, install_crd_files
from tests.integration.handler.cluster import HandlerProcess, controller_args, install_crds

PROCESS_RATIO = 50.0


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def bench(cluster: Cluster, args: argparse.Namespace, work: Path) -> None:
    root = Path(f"/run/kvpy-b{os.getpid()}")
    (root / "nodes").mkdir(parents=True, exist_ok=True)
    config = ClientConfig(kubeconfig=cluster.kubeconfig, user_agent="bench-handler")
    # Every CRD of manifests/base, as the deploy applies them: the controller's informers
    # list every family (replica sets, pools, snapshots, exports …) and must sync.
    install_crd_files(cluster)
    async with await KubeClient.connect(config, registry=Registry()) as kube:
        await install_crds(kube)
        with contextlib.suppress(Exception):
            await kube.create(
                NAMESPACES,
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            )
        handlers = {
            n: HandlerProcess(cluster, n, root, work / f"handler-{n}.log")
            for n in cluster.config.nodes
        }
        # Both local nodes share this host's 2 CPUs; at KubeVirt's default ratio (10: 100m
        # per vCPU) only 40 guests fit their CPU capacity, so the benchmark overcommits more.
        ratio = ["--cpu-allocation-ratio", str(args.cpu_allocation_ratio)]
        controller = ControllerProcess(
            cluster, NAMESPACE, work / "controller.log", extra=controller_args(root) + ratio
        )
        for h in handlers.values():
            await h.start()
        await controller.start()
        try:
            await measure(cluster, kube, handlers, args)
        finally:
            await teardown(kube, controller, handlers)
            shutil.rmtree(root, ignore_errors=True)


async def measure(
    cluster: Cluster,
    kube: KubeClient,
    handlers: Mapping[str, HandlerProcess],
    args: argparse.Namespace,
) -> None:
    watcher = Watcher()
    pids = [h.proc.pid for h in handlers.values() if h.proc is not None]
    rss_before = sum(rss_kib(p) for p in pids)
    writes_before = await writes(cluster)
    created: dict[str, float] = {}
    cpu_before = host_cpu_seconds()
    async with asyncio.TaskGroup() as tg:
        watch = tg.create_task(watcher.run(kube))
        await asyncio.sleep(0.5)
        await create_paced(kube, count=args.vmis, rate=args.rate, created=created)
        try:
            await watcher.until(lambda: len(watcher.running) >= args.vmis, args.timeout)
        except TimeoutError:
            print(f"    only {len(watcher.running)}/{args.vmis} reached Running in {args.timeout}s")
        cpu_used = host_cpu_seconds() - cpu_before
        rss_after = sum(rss_kib(p) for p in pids)
        writes_after = await writes(cluster)
        sample = sorted(watcher.running)[: args.pause_sample]

        def socket_of(name: str) -> Path:
            pod_dir = handlers[watcher.node_of[name]].pods_dir / watcher.pod_of[name]
            return pod_dir / "volumes" / "kubernetes.io~empty-dir" / "sockets" / "launcher-sock"

        loaded = await pause_latencies(watcher, sample, socket_of)
        settled_after = await settle(longest=args.settle_timeout)
        pauses = await pause_latencies(watcher, sample, socket_of)
        watch.cancel()
    latencies = [watcher.running[n] - created[n] for n in watcher.running if n in created]
    report_start(args.rate, latencies)
    report_pauses(pauses)
    l50, l95 = pct(loaded, 0.5) * 1e3, pct(loaded, 0.95) * 1e3
    print(
        f"    (once the host had settled, {settled_after:.0f} s after all were Running; "
        f"right after, with the guests still booting on every core: P50 {l50:.0f} ms "
        f"P95 {l95:.0f} ms)"
    )
    report_writes((writes_before, writes_after), len(latencies))
    n = max(1, len(latencies))
    print(
        f"(d) handler RSS per VMI held: {(rss_after - rss_before) / n:.0f} KiB "
        f"(both handlers {rss_before / 1024:.1f} -> {rss_after / 1024:.1f} MiB)"
    )
    print(
        f"    host CPU busy while starting them: {cpu_used:.0f} s = {cpu_used / n:.2f} CPU-s"
        f" per VMI on {os.cpu_count()} cores (launcher, libvirtd, QEMU + guest boot, daemons)"
    )
    if watcher.running:
        logs = [h.log for h in handlers.values()]
        await migrate_last(kube, keep=sorted(watcher.running)[0], handler_logs=logs)


async def teardown(
    kube: KubeClient, controller: ControllerProcess, handlers: Mapping[str, HandlerProcess]
) -> None:
    await delete_all(kube)
    await controller.stop()
    for h in handlers.values():
        await h.stop()


def run_process_mode(args: argparse.Namespace, work: Path) -> None:
    with process_cluster(args.session) as cluster:
        uvloop.run(bench(cluster, args, work))
    print("(f) launcher vs raw libvirt migration, same two daemons (scripts/bench-migration):")
    sys.stdout.flush()
    script = REPO / "scripts" / "bench-migration"
    done = subprocess.run([str(script), "--rounds", str(args.migration_rounds)], check=False)
    if done.returncode != 0:  # a report whatever the figures, but a crashed (f) is no report
        sys.exit(f"(f) scripts/bench-migration exited {done.returncode}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--nodes",
        choices=[str(k) for k in NodeKind],
        default=str(NodeKind.KUBELET),
        help="real nodes (kubelet, default) or process-mode nodes with migration rows (process)",
    )
    parser.add_argument(
        "--session", type=int, help="test session PID's cluster of that node kind (left running)"
    )
    parser.add_argument("--vmis", type=int, default=50)
    parser.add_argument("--rate", type=float, default=10.0, help="VMIs created per second")
    parser.add_argument("--pause-sample", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=900.0, help="for all to be Running")
    parser.add_argument(
        "--migration-rounds", type=int, default=4, help="process mode: (f); real nodes: (k)"
    )
    parser.add_argument(
        "--cpu-allocation-ratio",
        type=float,
        default=None,
        help=f"process mode: default {PROCESS_RATIO:g}; kubelet mode: the manifests' unless set",
    )
    parser.add_argument("--interval", type=float, default=0.5, help="kubelet mode: /proc sampling")
    parser.add_argument(
        "--floor", type=int, default=2, help="kubelet mode: bare-launcher boots for (h)"
    )
    parser.add_argument(
        "--no-raw-floor",
        dest="raw_floor",
        action="store_false",
        help="kubelet mode: skip (i)/(j)/(k), the raw-libvirt floors (start and migration)",
    )
    parser.add_argument(
        "--disk-rounds",
        type=int,
        default=3,
        help="kubelet mode: (l) timed pairs of a 1 GiB vs the tiny containerDisk (0: skip)",
    )
    parser.add_argument(
        "--settle-timeout",
        type=float,
        default=300.0,
        help="longest wait for the host to settle (kubelet mode: < 25%% busy before the first "
        "create; process mode: < 50%% before (b)'s second sample)",
    )
    parser.add_argument(
        "--logs",
        type=Path,
        default=None,
        help="where the daemons' and pods' logs are kept (default: a new directory under "
        "$TMPDIR, printed at the end)",
    )
    args = parser.parse_args()
    kind = NodeKind(args.nodes)
    print(
        f"kubevirt-py handler benchmark ({os.cpu_count()} cores, TCG guest, {args.vmis} VMIs, "
        f"{kind} nodes)"
    )
    work = args.logs or Path(tempfile.mkdtemp(prefix="bench-handler-"))
    work.mkdir(parents=True, exist_ok=True)
    if kind == NodeKind.KUBELET:
        run_real_nodes(args, work)
    else:
        if args.cpu_allocation_ratio is None:
            args.cpu_allocation_ratio = PROCESS_RATIO
        run_process_mode(args, work)
    print(f"logs: {work}")


if __name__ == "__main__":
    main()
