"""bench_handler.py on real nodes (`--nodes kubelet`): a private 2-node cluster of kubelets
with containerd + runc (localkube.testing.session_cluster(NodeKind.KUBELET): the images are
built and imported), kubevirt-py deployed from manifests/overlays/local, then N VMIs
(examples/vmi-tiny.yaml: kernelBoot + containerDisk from the tiny-guest image) created at
R/s. Printed:

(a) create -> Running, P50 / P95 / max; and create -> the guest's boot marker on its serial
    console (`KUBEVIRT-PY-GUEST-BOOTED`, seen by the sampler);
(b) domain event -> VMI status (pause through the launcher socket, as in process mode), once
    the window below has closed;
    then (a) and (b) phase by phase from the launchers' and handlers' log lines
    (start_phases.py: process start, imports, libvirtd, socket, handler, define, start, write);
(c) API writes per VMI (kube-apiserver's counters);
(e) migration through the cluster, as in process mode: all VMIs but one deleted, the last
    one migrated to the other node with a VMIM (through the handlers' migration proxy);
(g) the host CPU per VMI by component over the window from the first create until every
    guest has booted (proc_sampler.py, cpu_table.py: kubelet, containerd, shims + runc,
    init containers, launcher, libvirtd, QEMU start + boot, handler and controller pods,
    control plane, this benchmark, and the rest of the host).
(h) QEMU's CPU to the boot marker in the pods vs the same guest under a bare launcher on the
    host (floor_boot.py), after the cluster is gone;
(i) the raw-libvirt floor (floor_libvirt.py): the same N guests at the same rate with plain
    libvirt-python, the launcher's domain XML, one libvirtd per guest and then one shared:
    slot -> domain running and -> boot marker P50 / P95 beside ours, and the ratios;
(j) the CPU per VMI by component, the floors' columns beside ours;
(k) after (e), the source launcher's migrate through the handlers' proxy against raw libvirt
    over plain TCP between the two handler pods (a libvirtd in each one's network
    namespace, floor_migration.py), on the pod network and on the migration network, each
    pair with its ratio (migration_pairs.py; a missing link fails the bench);
(l) a VMI whose containerDisk is a 1 GiB image against one with the tiny disk, create ->
    Running, one at a time (disk_size.py; the image built once and imported on both nodes).
Row (f) (launcher vs raw libvirt between two bare launchers) stays in process mode.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import disk_size
import libvirt
import migration_pairs
import uvloop
from bench_cluster import real_cluster
from cpu_table import LAUNCHER_POD, Window, checks, print_table, split
from floor_boot import boot_floor, report_floor
from floor_libvirt import Ours, launcher_template, report_cpu, report_milestones, run_floor
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
from pod_timeline import epoch, print_timeline
from proc_sampler import Sampler
from start_phases import (
    PAUSE_MARKS,
    START_MARKS,
    pause_marks,
    print_event_to_status,
    print_phases,
    start_marks,
)

from localkube.cluster import Cluster
from localkube.deploy import NAMESPACE as KUBEVIRT_NAMESPACE
from localkube.deploy import Kubectl
from shared.kube import PODS, VMIS, ClientConfig, KubeClient, Registry
from tests.integration.controller.harness import NAMESPACES

RATIO_ENV = "VIRT_CONTROLLER_CPU_ALLOCATION_RATIO"
LEASE = "virt-controller-py"


class BenchFailed(Exception):
    """A figure the bench must print could not be measured (the message says which)."""


def run_real_nodes(args: argparse.Namespace, work: Path) -> None:
    began = time.monotonic()
    measured: list[Cluster] = []
    try:
        # The cluster's keys only while it runs (the logs stay in `work` for the reader).
        with (
            tempfile.TemporaryDirectory(prefix="bench-certs-") as certs,
            real_cluster(args.session, certs=Path(certs)) as (cluster, kubectl),
        ):
            if args.cpu_allocation_ratio is not None:
                set_ratio(kubectl, args.cpu_allocation_ratio)
            print(f"    (images, cluster and deployment ready in {time.monotonic() - began:.0f} s)")
            qemu_in_pods, ours = uvloop.run(bench(cluster, args, work))
            measured.append(cluster)
    except BenchFailed as exc:
        sys.exit(str(exc))
    except Exception as exc:  # a teardown error after the report: retry the teardown
        if not measured:
            raise
        print(f"    (cluster teardown failed: {exc!r}; tearing down again)")
        asyncio.run(measured[0].down(purge=True))
    report_floor(qemu_in_pods, boot_floor(args.floor, work))
    if args.raw_floor:
        raw_floor(ours, args, work)


def raw_floor(ours: Ours, args: argparse.Namespace, work: Path) -> None:
    """(i), (j): the same guests at the same rate on raw libvirt, after the cluster is gone
    and the host has settled; one libvirtd per guest, then one shared."""
    template = launcher_template(work)
    floors = []
    for shared in (False, True):
        uvloop.run(settle(busy_below=0.25, longest=args.settle_timeout))
        floors.append(
            uvloop.run(
                run_floor(
                    template, count=args.vmis, rate=args.rate, shared=shared, timeout=args.timeout
                )
            )
        )
    shutil.rmtree(template.work / "floor-template", ignore_errors=True)
    report_milestones(ours, floors, args.rate)
    report_cpu(ours, floors)


def keep_pod_logs(cluster: Cluster, into: Path) -> None:
    """The benchmark's and kubevirt's pod logs (launchers, handlers, controllers), kept in
    the work dir before the cluster and its node dirs go."""
    for node in cluster.config.nodes:
        for pod_dir in (cluster.config.nodes_dir / node / "log" / "pods").glob("*"):
            if pod_dir.name.startswith((f"{NAMESPACE}_", f"{KUBEVIRT_NAMESPACE}_")):
                shutil.copytree(pod_dir, into / node / pod_dir.name, dirs_exist_ok=True)


def handler_logs(cluster: Cluster) -> list[Callable[[], str]]:
    """Readers of each node's virt-handler pod log (all its files, as the kubelet keeps
    them on the node)."""

    def reader(node: str) -> Callable[[], str]:
        def read() -> str:
            pods = cluster.config.nodes_dir / node / "log" / "pods"
            files = sorted(pods.glob(f"{KUBEVIRT_NAMESPACE}_virt-handler-*/*/*.log"))
            return "\n".join(f.read_text(errors="replace") for f in files)

        return read

    return [reader(n) for n in cluster.config.nodes]


def set_ratio(kubectl: Kubectl, ratio: float) -> None:
    """Roll the controllers out with another CPU allocation ratio; wait until one of the new
    pods holds the leader Lease (else the first VMIs would wait for the old lease)."""
    deployment = "deployment/virt-controller"
    kubectl("set", "env", "-n", KUBEVIRT_NAMESPACE, deployment, f"{RATIO_ENV}={ratio:g}")
    kubectl("rollout", "status", "-n", KUBEVIRT_NAMESPACE, deployment, "--timeout=300s")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        selector = "kubevirt.io=virt-controller"
        listed = kubectl("get", "pods", "-n", KUBEVIRT_NAMESPACE, "-l", selector, "-o", "json")
        pods = json.loads(listed)["items"]
        names = [p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")]
        lease = json.loads(
            kubectl("get", "lease", "-n", KUBEVIRT_NAMESPACE, LEASE, "-o", "json", check=False)
            or "{}"
        )
        holder = (lease.get("spec") or {}).get("holderIdentity") or ""
        if any(holder.startswith(f"{n}-") for n in names):
            return
        time.sleep(1)
    print("    (warning: no new controller pod leads after the ratio change)")


async def migration_floor(
    cluster: Cluster, kube: KubeClient, args: argparse.Namespace, *, vmi: str, work: Path
) -> None:
    """(k): the proxy against raw libvirt on the pod network and on the migration network
    (migration_pairs.py), after (e). A missing link or a failed migration is a failure."""
    template = await asyncio.to_thread(launcher_template, work)
    kept = work / "pods"
    try:
        keep = functools.partial(keep_pod_logs, cluster, kept)
        run = migration_pairs.Run(
            vmi=vmi, rounds=args.migration_rounds, template=template, keep_logs=keep
        )
        pairs = await migration_pairs.measure(cluster, kube, run=run, kept=kept)
    except migration_pairs.LinkMissing as exc:
        raise BenchFailed(f"(k) FAILED: a link is missing: {exc}") from exc
    except (libvirt.libvirtError, TimeoutError, RuntimeError) as exc:
        raise BenchFailed(f"(k) FAILED: {exc!r}") from exc
    migration_pairs.report(pairs)


def sampler_for(cluster: Cluster) -> Sampler:
    fleet = cluster.fleet()
    roots = {fleet.node(n).layout.cgroup_root: n for n in cluster.config.nodes}
    ours = (f"{cluster.config.nodes_dir}/", f"{cluster.config.state_dir}/")
    return Sampler(ours=ours, cgroup_roots=roots, nodes_dir=cluster.config.nodes_dir)


async def bench(cluster: Cluster, args: argparse.Namespace, work: Path) -> tuple[list[float], Ours]:
    """The measured run; QEMU's CPU-seconds to the boot marker per guest, and our figures
    for the floor's comparison."""
    config = ClientConfig(kubeconfig=cluster.kubeconfig, user_agent="bench-handler")
    async with await KubeClient.connect(config, registry=Registry()) as kube:
        with contextlib.suppress(Exception):
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
            await kube.create(NAMESPACES, body)
        settled = await settle(busy_below=0.25, longest=args.settle_timeout)
        before, window = host_cpu_seconds(), min(5.0, max(1.0, args.settle_timeout))
        await asyncio.sleep(window)  # 5 s, shorter in the smallest runs (tests), as settle()'s
        busy = (host_cpu_seconds() - before) / window
        print(
            f"    (waited {settled:.0f} s for the host to settle; before the first create it was "
            f"{busy:.2f} of {os.cpu_count()} cores busy: the other users of this host, mostly)"
        )
        try:
            in_pods, ours, running = await measure(cluster, kube, args)
            await asyncio.to_thread(keep_pod_logs, cluster, work / "pods")
            if running:
                logs = handler_logs(cluster)
                await migrate_last(kube, keep=running[0], handler_logs=logs)
                await asyncio.to_thread(keep_pod_logs, cluster, work / "pods")
                if args.raw_floor:
                    await migration_floor(cluster, kube, args, vmi=running[0], work=work)
            if args.disk_rounds:
                try:
                    await disk_size.compare(cluster, kube, rounds=args.disk_rounds, timeout=300)
                except Exception as exc:  # a report: the floors below still run
                    print(f"(l) failed: {exc!r}")
            return in_pods, ours
        finally:
            await delete_all(kube)


async def measure(
    cluster: Cluster, kube: KubeClient, args: argparse.Namespace
) -> tuple[list[float], Ours, list[str]]:
    """(a), (b), (c), (g); QEMU's CPU-seconds to the boot marker per guest, our figures
    for the floor, and the VMIs that reached Running."""
    sampler, watcher = sampler_for(cluster), Watcher()
    to_wall = time.time() - time.monotonic()
    created: dict[str, float] = {}
    writes_before = await writes(cluster)
    async with asyncio.TaskGroup() as tg:
        watch = tg.create_task(watcher.run(kube))
        await asyncio.sleep(0.5)
        window = Window.start(await asyncio.to_thread(sampler.snapshot))
        stop, sampled = asyncio.Event(), asyncio.Event()
        sampling = tg.create_task(sample(sampler, window, args.interval, (stop, sampled)))
        await create_paced(kube, count=args.vmis, rate=args.rate, created=created)
        try:
            await watcher.until(lambda: len(watcher.running) >= args.vmis, args.timeout)
            await until_booted(sampler, watcher, args.vmis, sampled, args.timeout)
        except TimeoutError:
            print(
                f"    timed out after {args.timeout:g} s: {len(watcher.running)} Running, "
                f"{len(sampler.boots)} booted of {args.vmis}"
            )
        stop.set()
        await sampling
        window.add(await asyncio.to_thread(sampler.snapshot))
        writes_after = await writes(cluster)
        pods = {p["metadata"]["uid"]: p for p in (await kube.list(PODS)).items}
        vmis = (await kube.list(VMIS, namespace=NAMESPACE)).items
        stamped = {v["metadata"]["name"]: epoch(v["metadata"]["creationTimestamp"]) for v in vmis}
        names = sorted(watcher.running)[: args.pause_sample]
        sent: dict[str, tuple[float, float]] = {}
        pauses = await pause_latencies(watcher, names, socket_finder(cluster, watcher), sent)
        watch.cancel()
    to_running = [watcher.running[n] - created[n] for n in watcher.running]
    report_start(args.rate, to_running)
    times = {n: (stamped[n], t + to_wall) for n, t in watcher.running.items() if n in stamped}
    print_timeline(pods, watcher.pod_of, times)
    booted = {n: sampler.boots[p].at for n, p in watcher.pod_of.items() if p in sampler.boots}
    report_booted([booted[n] - created[n] for n in booted], len(created))
    report_pauses(pauses)
    print_breakdown(cluster, created, watcher.running, sent, to_wall=to_wall)
    report_writes((writes_before, writes_after), len(watcher.running))
    pod_roles = {uid: (p["metadata"].get("labels") or {}).get("kubevirt.io", "")
                 for uid, p in pods.items()}  # fmt: skip
    rows = split(window, pod_roles, sampler.boots)
    print_table(rows, vmis=len(created), seconds=window.seconds)
    print(f"    checks: {checks(window, pod_roles, sampler.boots)}")
    in_pods = [b.qemu_cpu for uid, b in sampler.boots.items() if pod_roles.get(uid) == LAUNCHER_POD]
    ours = Ours(to_running, [booted[n] - created[n] for n in booted], rows, len(created))
    return in_pods, ours, sorted(watcher.running)


async def sample(
    sampler: Sampler, window: Window, interval: float, events: tuple[asyncio.Event, asyncio.Event]
) -> None:
    """A snapshot every `interval` seconds until `stop` is set, setting `sampled` after each
    (one at a time: the sampler is not thread-safe)."""
    stop, sampled = events
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
        if not stop.is_set():
            window.add(await asyncio.to_thread(sampler.snapshot))
            sampled.set()


async def until_booted(
    sampler: Sampler, watcher: Watcher, count: int, sampled: asyncio.Event, timeout: float
) -> None:
    """Until the sampler has seen the boot marker of `count` Running VMIs' guests."""
    async with asyncio.timeout(timeout):
        while sum(1 for p in watcher.pod_of.values() if p in sampler.boots) < count:
            sampled.clear()
            await sampled.wait()


def socket_finder(cluster: Cluster, watcher: Watcher) -> Callable[[str], Path]:
    """A VMI's launcher socket, on its node's /var/lib/kubelet as seen from the host."""

    def socket_of(name: str) -> Path:
        pod = watcher.pod_of[name]
        pod_dir = cluster.config.nodes_dir / watcher.node_of[name] / "kubelet" / "pods" / pod
        return pod_dir / "volumes" / "kubernetes.io~empty-dir" / "sockets" / "launcher-sock"

    return socket_of


def report_booted(latencies: list[float], created: int) -> None:
    print(f"    create -> guest boot marker on its console, {len(latencies)}/{created} VMIs")
    print(
        f"    P50 {pct(latencies, 0.5):.2f} s  P95 {pct(latencies, 0.95):.2f} s  "
        f"max {max(latencies, default=float('nan')):.2f} s"
    )


def print_breakdown(
    cluster: Cluster,
    created: dict[str, float],
    running: dict[str, float],
    sent: dict[str, tuple[float, float]],
    *,
    to_wall: float,
) -> None:
    """(a) and (b) phase by phase, from the launchers' and handlers' own log lines."""
    pods = cluster.config.nodes_dir.glob("*/log/pods")
    files = [
        f
        for d in pods
        for prefix in (f"{NAMESPACE}_virt-launcher-", f"{KUBEVIRT_NAMESPACE}_virt-handler-")
        for f in sorted(d.glob(f"{prefix}*/*/*.log"))
    ]
    marks = start_marks(files)
    for name, at in created.items():
        marks.setdefault(name, {})["created"] = at + to_wall
    for name, at in running.items():
        marks.setdefault(name, {})["seen"] = at + to_wall
    print_phases("create -> Running, phase by phase", marks, START_MARKS)
    walled = {n: (s + to_wall, w + to_wall) for n, (s, w) in sent.items()}
    paused = pause_marks(files, walled)
    print_phases("pause -> Paused in the VMI's status", paused, PAUSE_MARKS)
    print_event_to_status(paused)
