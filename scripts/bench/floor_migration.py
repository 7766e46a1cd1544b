"""(k) The raw-libvirt migration floor on real nodes (issue 10, item 5): two private
libvirtds, one in each node's network namespace, listening on plain TCP (no TLS, no auth)
bound to that node's address only, migrate the launcher's domain (the tiny guest, booted)
back and forth with libvirt-python: peer to peer over qemu+tcp, QEMU's memory stream and the
NBD disk copy over plain TCP between the two node addresses, the launcher's flags and
max-downtime limit. Beside it, our migration through the handlers' mutual-TLS proxy in the
same run: VMIM created -> Succeeded, and the source launcher's own migrate call (its
`migration_succeeded` log line), whose ratio to the raw migration is the proxy's price.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import libvirt
from floor_libvirt import (
    GUEST_RUN,
    FloorGuest,
    Template,
    define_and_start,
    guest_xml,
    new_daemon,
    prepare_guest,
)
from proc_sampler import BOOT_MARKER

from launcher.libvirtd import LibvirtDaemon
from launcher.migration import DowntimePolicy
from localkube.cluster import Cluster

FLAGS = (
    libvirt.VIR_MIGRATE_LIVE
    | libvirt.VIR_MIGRATE_PEER2PEER
    | libvirt.VIR_MIGRATE_PERSIST_DEST
    | libvirt.VIR_MIGRATE_NON_SHARED_INC
)
LISTEN = 'listen_tls = 0\nlisten_tcp = 1\ntcp_port = "16509"\nauth_tcp = "none"\n'
SECONDS = re.compile(r'\bseconds"?\s*[=:]\s*"?([0-9.]+)')


@dataclass(frozen=True, slots=True)
class NodeEnd:
    """One node's libvirtd: its network namespace, address and (host-side) daemon."""

    netns: str
    address: str
    daemon: LibvirtDaemon

    @property
    def tcp_uri(self) -> str:
        return f"qemu+tcp://{self.address}/system"


class NetnsDaemon(LibvirtDaemon):
    """The launcher's LibvirtDaemon, run inside a node's network namespace."""

    def __init__(self, base: LibvirtDaemon, netns: str, listen: Path) -> None:
        super().__init__(paths=base.paths, libvirtd=listen, tini=Path("/usr/bin/tini"))
        self._netns = netns

    def _argv(self) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{self._netns}", "--", *super()._argv()]


def node_ends(cluster: Cluster) -> list[tuple[str, str]]:
    """(netns, node address) of the cluster's first two nodes."""
    fleet = cluster.fleet()
    nodes = [fleet.node(n).ns for n in cluster.config.nodes[:2]]
    return [(ns.netns, ns.layout.node_ip) for ns in nodes]


async def start_end(root: Path, netns: str, address: str) -> NodeEnd:
    listen = root.parent / "libvirtd-listen"
    listen.write_text('#!/bin/sh\nexec /usr/sbin/libvirtd --listen "$@"\n')
    listen.chmod(0o755)
    base = new_daemon(root)
    with base.paths.config.open("a") as conf:
        conf.write(LISTEN + f'listen_addr = "{address}"\n')
    daemon = NetnsDaemon(base, netns, listen)
    try:
        await daemon.start()
    except BaseException:
        await daemon.stop()  # a daemon that never answered may still run
        raise
    return NodeEnd(netns=netns, address=address, daemon=daemon)


async def raw_migrations(
    template: Template, ends: list[tuple[str, str]], *, rounds: int, timeout: float = 300.0
) -> list[tuple[float, int | None]]:
    """(seconds, downtime ms) of `rounds` raw migrations, alternating A -> B and B -> A."""
    base = template.work / "floor-migration"
    a_guest = FloorGuest(index=900, root=base / "a")
    b_guest = FloorGuest(index=900, root=base / "b")
    prepare_guest(template, a_guest)
    prepare_guest(template, b_guest)
    started: list[NodeEnd] = []
    try:
        for side, (netns, address) in zip("ab", ends[:2], strict=True):
            started.append(await start_end(base / side / "libvirt", netns, address))
        a, b = started
        async with asyncio.timeout(timeout):
            xml = guest_xml(template, a_guest, sockets=GUEST_RUN)
            await asyncio.to_thread(_boot, a.daemon.paths.uri, xml, a_guest.serial_log)
            out = []
            pairs = [(a, b, a_guest, b_guest), (b, a, b_guest, a_guest)]
            for i in range(rounds):
                src, dst, src_guest, dst_guest = pairs[i % 2]
                out.append(await asyncio.to_thread(_migrate, src, dst, (src_guest, dst_guest)))
            return out
    finally:
        for end in started:
            await end.daemon.stop()
        shutil.rmtree(base, ignore_errors=True)


def _boot(uri: str, xml: str, serial: Path) -> None:
    define_and_start(uri, xml)
    deadline = time.monotonic() + 180
    while BOOT_MARKER not in (serial.read_bytes() if serial.exists() else b""):
        if time.monotonic() > deadline:
            raise TimeoutError("the migration floor's guest printed no boot marker in 180 s")
        time.sleep(0.2)


def _migrate(
    src: NodeEnd, dst: NodeEnd, guests: tuple[FloorGuest, FloorGuest]
) -> tuple[float, int | None]:
    """One raw migration src -> dst; guests: the guest's files on each side."""
    src_guest, dst_guest = guests
    conn = libvirt.open(src.daemon.paths.uri)
    try:
        dom = conn.lookupByName(src_guest.name)
        xml = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_MIGRATABLE)
        xml = xml.replace(str(src_guest.root), str(dst_guest.root))
        disks = [t.split("'")[1] for t in re.findall(r"<target dev='vd[a-z]+'", xml)]
        params = {
            libvirt.VIR_MIGRATE_PARAM_URI: f"tcp://{dst.address}",
            libvirt.VIR_MIGRATE_PARAM_DISKS_URI: f"tcp://{dst.address}",
            libvirt.VIR_MIGRATE_PARAM_DEST_XML: xml,
            libvirt.VIR_MIGRATE_PARAM_PERSIST_XML: xml,
            libvirt.VIR_MIGRATE_PARAM_MIGRATE_DISKS: disks,
        }
        dom.migrateSetMaxDowntime(DowntimePolicy().initial_ms, 0)
        began = time.monotonic()
        dom.migrateToURI3(dst.tcp_uri, params, FLAGS)
        took = time.monotonic() - began
        stats = dom.jobStats(libvirt.VIR_DOMAIN_JOB_STATS_COMPLETED)
        downtime = stats.get("downtime")
        return took, int(downtime) if downtime is not None else None
    finally:
        conn.close()


def launcher_seconds(pod_logs: Path) -> list[float]:
    """The source launchers' own migrate durations (`migration_succeeded seconds=`), from
    the pod logs the benchmark kept."""
    found = []
    for log in pod_logs.rglob("*.log"):
        if "virt-launcher" not in str(log):
            continue
        for line in log.read_text(errors="replace").splitlines():
            if "migration_succeeded" in line and (m := SECONDS.search(line)):
                found.append(float(m.group(1)))
    return found


def report(raw: list[tuple[float, int | None]], ours: list[float]) -> None:
    print(f"(k) migration floor: raw libvirt over plain TCP between the two nodes' addresses "
          f"(libvirtd in each node's netns, no TLS), {len(raw)} rounds")  # fmt: skip
    if not raw:
        return
    took = statistics.median(t for t, _ in raw)
    downs = [d for _, d in raw if d is not None]
    down = f"{statistics.median(downs):.0f} ms" if downs else "?"
    print(f"    raw migrateToURI3 median {took:.2f} s (rounds: "
          f"{', '.join(f'{t:.2f}' for t, _ in raw)}), guest downtime median {down}")  # fmt: skip
    if ours:
        mine = statistics.median(ours)
        print(
            "    launcher's migrate through the handlers' mTLS proxy (on the migration network:"
            f" the test bed's KubeVirt CR names one) {mine:.2f} s -> "
            f"{mine / took:.2f}x raw (target <= 1.5x)"
        )
    else:
        print("    (no migration_succeeded line in the kept launcher logs)")
