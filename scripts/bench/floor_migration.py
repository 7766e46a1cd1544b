"""(k) The raw-libvirt migration floor on real nodes (issue 10, item 5; issue 37): two private
libvirtds, one in each node's virt-handler pod's network namespace (where the migration
proxy runs), listening on plain TCP (no TLS, no auth) on the pod's address, migrate the
launcher's domain (the tiny guest, booted) back and forth with libvirt-python: peer to peer
over qemu+tcp, QEMU's memory stream and the NBD disk copy over plain TCP between the two
pods' addresses on one network, the launcher's flags and max-downtime limit. Each round
names the network whose addresses carry the streams: the pod network (`eth0`) or the
migration network (`migration0`), so both floors come from the same daemons, guest and run.
The proxy's side and the report are in migration_pairs.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
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

FLAGS = (
    libvirt.VIR_MIGRATE_LIVE
    | libvirt.VIR_MIGRATE_PEER2PEER
    | libvirt.VIR_MIGRATE_PERSIST_DEST
    | libvirt.VIR_MIGRATE_NON_SHARED_INC
)
LISTEN = 'listen_tls = 0\nlisten_tcp = 1\ntcp_port = "16509"\nauth_tcp = "none"\n'
SECONDS = re.compile(r'\bseconds"?\s*[=:]\s*"?([0-9.]+)')

Round = tuple[float, int | None]  # seconds in migrateToURI3, libvirt's guest downtime (ms)


class Network(StrEnum):
    """The two links a migration can take between the handler pods, by interface."""

    POD = "eth0"
    MIGRATION = "migration0"

    @property
    def label(self) -> str:
        return "pod network" if self is Network.POD else "migration network"


@dataclass(frozen=True, slots=True, kw_only=True)
class PodLinks:
    """One node's virt-handler pod: its network namespace (as the host opens it) and its
    IPv4 address on each network."""

    node: str
    netns: Path
    addresses: Mapping[Network, str]


@dataclass(frozen=True, slots=True)
class NodeEnd:
    """One end's libvirtd (host-side object, run in the pod's network namespace)."""

    links: PodLinks
    daemon: LibvirtDaemon

    @property
    def tcp_uri(self) -> str:
        return f"qemu+tcp://{self.links.addresses[Network.POD]}/system"


class NetnsDaemon(LibvirtDaemon):
    """The launcher's LibvirtDaemon, run inside another network namespace."""

    def __init__(self, base: LibvirtDaemon, netns: Path, listen: Path) -> None:
        super().__init__(paths=base.paths, libvirtd=listen, tini=Path("/usr/bin/tini"))
        self._netns = netns

    def _argv(self) -> list[str]:
        return ["nsenter", f"--net={self._netns}", "--", *super()._argv()]


async def start_end(root: Path, links: PodLinks) -> NodeEnd:
    listen = root.parent / "libvirtd-listen"
    listen.write_text('#!/bin/sh\nexec /usr/sbin/libvirtd --listen "$@"\n')
    listen.chmod(0o755)
    base = new_daemon(root)
    with base.paths.config.open("a") as conf:
        conf.write(LISTEN + f'listen_addr = "{links.addresses[Network.POD]}"\n')
    daemon = NetnsDaemon(base, links.netns, listen)
    try:
        await daemon.start()
    except BaseException:
        await daemon.stop()  # a daemon that never answered may still run
        raise
    return NodeEnd(links=links, daemon=daemon)


@contextlib.asynccontextmanager
async def raw_pair(
    template: Template, ends: Sequence[PodLinks], *, warm_up: Network, timeout: float = 300.0
) -> AsyncIterator[Callable[[Network], Awaitable[Round]]]:
    """Start a libvirtd in each pod's network namespace, boot a guest of its own on the
    first, migrate it once over `warm_up` (the guest that just booted still dirties memory:
    DHCP, qemu-ga; not counted), then yield `migrate(network)`: one timed migration to the
    other end over that network, each call the other direction."""
    base = template.work / "floor-migration"
    a_guest = FloorGuest(index=900, root=base / "a")
    b_guest = FloorGuest(index=900, root=base / "b")
    prepare_guest(template, a_guest)
    prepare_guest(template, b_guest)
    started: list[NodeEnd] = []
    try:
        for side, links in zip("ab", ends[:2], strict=True):
            started.append(await start_end(base / side / "libvirt", links))
        a, b = started
        pairs = [(a, b, (a_guest, b_guest)), (b, a, (b_guest, a_guest))]
        done = [0]

        async def migrate(network: Network) -> Round:
            src, dst, guests = pairs[done[0] % 2]
            done[0] += 1
            async with asyncio.timeout(timeout):
                return await asyncio.to_thread(_migrate, src, dst, guests, network)

        async with asyncio.timeout(timeout):
            xml = guest_xml(template, a_guest, sockets=GUEST_RUN)
            await asyncio.to_thread(_boot, a.daemon.paths.uri, xml, a_guest.serial_log)
        await migrate(warm_up)
        yield migrate
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
    src: NodeEnd, dst: NodeEnd, guests: tuple[FloorGuest, FloorGuest], network: Network
) -> Round:
    """One raw migration src -> dst, its streams to dst's address on `network`; guests: the
    guest's files on each side."""
    src_guest, dst_guest = guests
    address = dst.links.addresses[network]
    conn = libvirt.open(src.daemon.paths.uri)
    try:
        dom = conn.lookupByName(src_guest.name)
        xml = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_MIGRATABLE)
        xml = xml.replace(str(src_guest.root), str(dst_guest.root))
        disks = [t.split("'")[1] for t in re.findall(r"<target dev='vd[a-z]+'", xml)]
        params = {
            libvirt.VIR_MIGRATE_PARAM_URI: f"tcp://{address}",
            libvirt.VIR_MIGRATE_PARAM_DISKS_URI: f"tcp://{address}",
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
    for log in sorted(pod_logs.rglob("*.log")):
        if "virt-launcher" not in str(log):
            continue
        for line in log.read_text(errors="replace").splitlines():
            if "migration_succeeded" in line and (m := SECONDS.search(line)):
                found.append(float(m.group(1)))
    return found
