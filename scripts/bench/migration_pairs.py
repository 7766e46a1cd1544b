"""(k) on real nodes: our migration through the handlers' mutual-TLS proxy against raw libvirt
(floor_migration.py), on each of the two links between the nodes, in one run:

1. the links are found in each node's virt-handler pod (its `eth0` on the pod network, its
   `migration0` on the migration network the KubeVirt CR names); a node without either is
   a failure naming the node and the link (`LinkMissing`), before anything is measured;
2. the migration network, as deployed (the handlers listen, advertise and dial on
   `migration0`): a libvirtd in each handler pod's network namespace migrates a guest of
   its own to the other pod's `migration0` address, each raw round followed by one VMIM of
   the bench's VMI through the proxy, so both sides of the pair run under the same load;
3. the pod network: `migrations.network` taken off the CR (the controller takes
   `migration0` off the handler DaemonSet, which rolls), then the same with the raw
   streams to the other pod's `eth0` address; then the CR's network put back (rolled
   again) and the links checked as in 1.

The proxy's figure is the source launcher's own migrate call (`migration_succeeded
seconds=`, the same migrateToURI3 the raw floor times), from the launcher pod logs kept
after each VMIM; (e)'s migration counts as the first on the migration network.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from floor_libvirt import Template
from floor_migration import Network, PodLinks, Round, launcher_seconds, raw_pair
from handler_common import NAMESPACE, host_cpu_seconds, settle

from localkube.cluster import Cluster
from localkube.deploy import NAMESPACE as KUBEVIRT_NAMESPACE
from shared.kube import KUBEVIRTS, PODS, VMIMS, KubeClient
from shared.kube.resources import DAEMONSETS
from shared.mignet import HANDLER_DAEMONSET as HANDLER
from shared.model import MigrationPhase, VirtualMachineInstanceMigration
from shared.multus import NETWORKS_ANNOTATION

TARGET = 1.2  # issue 37: the proxy at most 1.2x raw libvirt on each link
# Before each block's rounds the host settles (below half busy over 5 s, at most 30 s): a
# rolled handler's start-up or the floor guest's boot is in no round.
SETTLED, SETTLE_S = 0.5, 30.0
KUBEVIRT_CR = "kubevirt"


class LinkMissing(Exception):
    """A node's handler pod lacks one of the two links the pairs are measured on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Pairs:
    """Per network: the proxy's migrate seconds and the raw floor's rounds."""

    proxy: Mapping[Network, list[float]]
    raw: Mapping[Network, list[Round]]
    host: HostLoad


@dataclass(frozen=True, slots=True, kw_only=True)
class HostLoad:
    """The whole host while the pairs ran (other users of the machine included)."""

    busy_cores: float  # busy CPU-seconds per second, averaged over the pairs' run
    load: tuple[float, float]  # 1-minute load average at the start and at the end

    def __str__(self) -> str:
        return (
            f"{self.busy_cores:.2f} of {os.cpu_count()} cores busy on average (all users), "
            f"1-min load average {self.load[0]:.1f} at the start, {self.load[1]:.1f} at the end"
        )


def parse_addresses(ip_json: str) -> dict[Network, str]:
    """The IPv4 address of each network's interface in `ip -j -4 addr` output."""
    found: dict[Network, str] = {}
    for link in json.loads(ip_json or "[]"):
        try:
            network = Network(link.get("ifname", ""))
        except ValueError:
            continue
        for addr in link.get("addr_info") or ():
            if addr.get("family") == "inet" and addr.get("local"):
                found.setdefault(network, addr["local"])
    return found


def check_links(
    links: Sequence[PodLinks], nodes: Sequence[str], *, need: Sequence[Network] = tuple(Network)
) -> None:
    """LinkMissing naming every node without a handler pod, or whose pod has no IPv4
    address on one of the networks."""
    problems = []
    by_node = {pod.node: pod for pod in links}
    for node in nodes:
        pod = by_node.get(node)
        if pod is None:
            problems.append(f"node {node} has no running virt-handler pod")
            continue
        problems += [
            f"node {node}: the virt-handler pod has no IPv4 address on its {n} ({n.label})"
            for n in need
            if n not in pod.addresses
        ]
    if problems:
        raise LinkMissing("; ".join(problems))


def pod_pid(uid: str, *, proc: Path = Path("/proc")) -> int | None:
    """A process of the pod `uid` (any: they share its network namespace), by its cgroup."""
    marks = (uid, uid.replace("-", "_"))
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroups = (entry / "cgroup").read_text()
        except OSError:
            continue
        if any(mark in cgroups for mark in marks):
            return int(entry.name)
    return None


async def handler_links(
    kube: KubeClient, nodes: Sequence[str], *, need: Sequence[Network]
) -> list[PodLinks]:
    """Each node's handler pod, its network namespace and addresses; LinkMissing if one
    lacks a link it needs."""
    listed = await kube.list(
        PODS, namespace=KUBEVIRT_NAMESPACE, label_selector=f"kubevirt.io={HANDLER}"
    )
    found = []
    for pod in listed.items:
        if pod["metadata"].get("deletionTimestamp") or pod["status"].get("phase") != "Running":
            continue
        pid = await asyncio.to_thread(pod_pid, pod["metadata"]["uid"])
        if pid is None:
            continue
        netns = Path(f"/proc/{pid}/ns/net")
        argv = ["nsenter", f"--net={netns}", "--", "ip", "-j", "-4", "addr", "show"]
        done = await asyncio.to_thread(
            subprocess.run, argv, capture_output=True, text=True, timeout=30, check=False
        )
        found.append(
            PodLinks(
                node=pod["spec"]["nodeName"], netns=netns, addresses=parse_addresses(done.stdout)
            )
        )
    found.sort(key=lambda p: nodes.index(p.node) if p.node in nodes else len(nodes))
    check_links(found, nodes, need=need)
    return found[: len(nodes)]


async def set_migration_network(
    kube: KubeClient, network: str | None, *, timeout: float = 300
) -> None:
    """Set (or take off) the CR's `migrations.network`, then wait until the handler
    DaemonSet's pods carry (or lack) it and every node runs a new, ready one."""
    patch = {"spec": {"configuration": {"migrations": {"network": network}}}}
    await kube.patch(KUBEVIRTS, KUBEVIRT_CR, patch, namespace=KUBEVIRT_NAMESPACE)
    async with asyncio.timeout(timeout):
        while True:
            if await _rolled(kube, want_network=network is not None):
                return
            await asyncio.sleep(1)


async def _rolled(kube: KubeClient, *, want_network: bool) -> bool:
    ds = await kube.get(DAEMONSETS, HANDLER, namespace=KUBEVIRT_NAMESPACE)
    template = ds["spec"]["template"]["metadata"].get("annotations") or {}
    if (NETWORKS_ANNOTATION in template) != want_network:
        return False
    status, want = ds.get("status") or {}, ds["metadata"]["generation"]
    counts = [status.get(k, -1) for k in ("desiredNumberScheduled", "updatedNumberScheduled",
                                          "numberAvailable", "numberReady")]  # fmt: skip
    if status.get("observedGeneration") != want or len(set(counts)) != 1:
        return False
    pods = await kube.list(
        PODS, namespace=KUBEVIRT_NAMESPACE, label_selector=f"kubevirt.io={HANDLER}"
    )
    return len(pods.items) == int(counts[0])  # the old pods gone


async def proxy_migration(kube: KubeClient, *, vmi: str, name: str) -> None:
    """One VMIM of `vmi`, waited until final; a failure unless it Succeeded."""
    body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": name},
        "spec": {"vmiName": vmi},
    }
    began = time.monotonic()
    await kube.create(VMIMS, body, namespace=NAMESPACE)
    phase: MigrationPhase | None = MigrationPhase.PENDING
    async with asyncio.timeout(300):
        while phase is None or not phase.is_final():
            await asyncio.sleep(0.1)
            raw = await kube.get(VMIMS, name, namespace=NAMESPACE)
            phase = VirtualMachineInstanceMigration.from_dict(raw).status.phase
    print(f"    VMIM {name}: {phase} in {time.monotonic() - began:.2f} s")
    if phase is not MigrationPhase.SUCCEEDED:
        raise RuntimeError(f"VMIM {name} ended {phase}")
    await asyncio.sleep(2)  # the source launcher's last log lines


def new_seconds(before: Sequence[float], after: Sequence[float]) -> list[float]:
    """The migrate durations in `after` that were not in `before` (kept logs grow)."""
    return list((Counter(after) - Counter(before)).elements())


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """What one block needs: the bench's VMI, rounds, the floor's template and the kept
    logs' refresh."""

    vmi: str
    rounds: int
    template: Template
    keep_logs: Callable[[], None]


async def block(
    kube: KubeClient, links: Sequence[PodLinks], network: Network, *, run: Run, proxy_rounds: int
) -> list[Round]:
    """One network's pair, side by side under the same load: `run.rounds` raw migrations
    over `network`, each followed by one VMIM (the first `proxy_rounds` of them); the raw
    rounds."""
    raw: list[Round] = []
    async with raw_pair(run.template, links, warm_up=network) as migrate:
        await settle(busy_below=SETTLED, longest=SETTLE_S)
        for i in range(run.rounds):
            raw.append(await migrate(network))
            if i < proxy_rounds:
                tag = f"{'podnet' if network is Network.POD else 'mignet'}-{i}"
                await proxy_migration(kube, vmi=run.vmi, name=f"bench-{tag}")
                await asyncio.to_thread(run.keep_logs)
    return raw


async def measure(cluster: Cluster, kube: KubeClient, *, run: Run, kept: Path) -> Pairs:
    """The steps of the module's docstring; kept: the kept pod logs' dir."""
    began, busy, load = time.monotonic(), host_cpu_seconds(), os.getloadavg()[0]
    nodes = list(cluster.config.nodes[:2])
    links = await handler_links(kube, nodes, need=tuple(Network))
    raw = {Network.MIGRATION: await block(kube, links, Network.MIGRATION, run=run,
                                          proxy_rounds=run.rounds - 1)}  # fmt: skip
    on_migration = launcher_seconds(kept)  # (e)'s migration and this block's
    cr = await kube.get(KUBEVIRTS, KUBEVIRT_CR, namespace=KUBEVIRT_NAMESPACE)
    network = ((cr["spec"].get("configuration") or {}).get("migrations") or {}).get("network")
    await set_migration_network(kube, None)
    try:
        links = await handler_links(kube, nodes, need=(Network.POD,))
        raw[Network.POD] = await block(kube, links, Network.POD, run=run, proxy_rounds=run.rounds)
    finally:
        await set_migration_network(kube, network)
    on_pod = new_seconds(on_migration, launcher_seconds(kept))
    await handler_links(kube, nodes, need=tuple(Network))  # back as deployed
    host = HostLoad(
        busy_cores=(host_cpu_seconds() - busy) / (time.monotonic() - began),
        load=(load, os.getloadavg()[0]),
    )
    return Pairs(proxy={Network.MIGRATION: on_migration, Network.POD: on_pod}, raw=raw, host=host)


def report(pairs: Pairs) -> None:
    """Both pairs, each with its ratio against the target."""
    print("(k) the proxy vs raw libvirt on each link, same run: raw = libvirtd in each node's "
          "virt-handler pod netns, plain TCP, no TLS, the launcher's XML, flags and downtime "
          "limit; proxy = the source launcher's migrate through the handlers' mTLS proxy")  # fmt: skip
    print(f"    host during (k): {pairs.host}")
    for network in Network:
        raw, proxy = pairs.raw.get(network) or [], pairs.proxy.get(network) or []
        print(f"    {network.label} ({network}):")
        if not raw or not proxy:
            print(f"      FAILED: no figure ({len(raw)} raw, {len(proxy)} proxy migrations)")
            continue
        took, mine = statistics.median(t for t, _ in raw), statistics.median(proxy)
        downs = [d for _, d in raw if d is not None]
        down = f"{statistics.median(downs):.0f} ms" if downs else "?"
        print(f"      raw libvirt median {took:.2f} s (rounds {', '.join(f'{t:.2f}' for t, _ in raw)}),"
              f" guest downtime median {down}")  # fmt: skip
        verdict = "ok" if mine <= TARGET * took else "MISSED"
        print(f"      proxy median {mine:.2f} s (rounds {', '.join(f'{t:.2f}' for t in proxy)}) -> "
              f"{mine / took:.2f}x raw (target <= {TARGET}x): {verdict}")  # fmt: skip
