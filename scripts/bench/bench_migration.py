"""Migration benchmark: the launcher's live migration vs a raw libvirt migration, same daemons.

Two launchers (two private libvirtds) run the tiny guest. Each round migrates it A → B
through the launchers (prepare_migration_target on B, migrate on A, polled through
get_domain until final), then B → A with raw libvirt-python (migrateToURI3, the same flags,
streams, destination-XML rule and max-downtime limit), so both paths use the same two
daemons in the same run.
Prints total time (median of rounds) and libvirt's guest downtime for both, and the ratio
against the targets (total ≤ 1.5x raw, downtime ≤ 100 ms). A report, not a test: exits 0.
Stopped by SIGTERM, SIGINT or SIGHUP it tears down what it started (scripts/bench/scratch.py).
No network here (the streams are Unix sockets between two launchers on this host): the proxy
against raw libvirt over the pod network and over the migration network, on real nodes, is
`scripts/bench-handler`'s (k) (migration_pairs.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import libvirt
import uvloop

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from scratch import Scratch
from scratch import main as run_stoppable

from launcher.migration import DowntimePolicy
from launcher.migration_endpoint import LINK_ROOT, Endpoint
from launcher.migxml import destination_xml, writable_disks
from shared.wire.launcher_api import Method
from shared.wire.migration import MigrationInfo
from tests.integration.launcher.harness import Launcher, call, tiny_vmi, wait_for

FLAGS = libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER | libvirt.VIR_MIGRATE_PERSIST_DEST
DOMAIN = "default_bench"


async def launcher_round(src: Launcher, dst: Launcher) -> tuple[float, int | None]:
    """prepare on dst, migrate on src, poll until final; (seconds migrate→final, downtime)."""
    prepared = await call(dst, Method.PREPARE_MIGRATION_TARGET, {"vmi": dst.vmi})
    began = time.monotonic()
    await call(src, Method.MIGRATE, {"address": prepared["address"]})
    while True:
        info = MigrationInfo.from_status((await call(src, Method.GET_DOMAIN))["migration"])
        if info is not None and info.phase.is_final():
            break
        await asyncio.sleep(0.01)
    took = time.monotonic() - began
    if info.failure_reason:
        raise SystemExit(f"launcher migration failed: {info.failure_reason}")
    return took, info.downtime_ms


def raw_round(src: Launcher, dst: Launcher) -> tuple[float, int | None]:
    """Raw libvirt-python migration src → dst over the same kind of Unix-socket streams."""
    link = LINK_ROOT / f"bench-{os.getpid()}"
    link.unlink(missing_ok=True)
    link.symlink_to(dst.private / "libvirt")
    ep = Endpoint(address=link)
    for sock in (ep.memory_socket, ep.disks_socket):
        sock.unlink(missing_ok=True)
    sconn, dconn = libvirt.open(src.libvirt_uri), libvirt.open(dst.libvirt_uri)
    try:
        dom = sconn.lookupByName(DOMAIN)
        target_xml = dconn.lookupByName(DOMAIN).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        xml = destination_xml(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_MIGRATABLE), target_xml)
        params = {
            libvirt.VIR_MIGRATE_PARAM_URI: ep.migration_uri,
            libvirt.VIR_MIGRATE_PARAM_DEST_XML: xml,
            libvirt.VIR_MIGRATE_PARAM_PERSIST_XML: xml,
            libvirt.VIR_MIGRATE_PARAM_MIGRATE_DISKS: list(writable_disks(xml)),
            libvirt.VIR_MIGRATE_PARAM_DISKS_URI: ep.disks_uri,
        }
        dom.migrateSetMaxDowntime(DowntimePolicy().initial_ms, 0)
        began = time.monotonic()
        dom.migrateToURI3(ep.libvirt_uri, params, FLAGS | libvirt.VIR_MIGRATE_NON_SHARED_INC)
        took = time.monotonic() - began
        stats = dom.jobStats(libvirt.VIR_DOMAIN_JOB_STATS_COMPLETED)
        return took, stats.get("downtime")
    finally:
        sconn.close()
        dconn.close()
        link.unlink(missing_ok=True)


def _ticking(launcher: Launcher) -> bool:
    return "KUBEVIRT-PY-TICK 2" in launcher.serial()


async def run(rounds: int, scratch: Scratch) -> None:
    vmi = tiny_vmi(name="bench")
    a = Launcher(root=scratch.dir("kvm"), vmi=vmi)
    b = Launcher(root=scratch.dir("kvm"), vmi=vmi)
    a.start()
    b.start()
    try:
        await call(a, Method.SYNC, {"vmi": a.vmi})
        await wait_for(lambda: _ticking(a), timeout=120, what="guest ticking")
        ours: list[tuple[float, int | None]] = []
        raw: list[tuple[float, int | None]] = []
        for _ in range(rounds):
            ours.append(await launcher_round(a, b))
            await asyncio.sleep(1.0)
            raw.append(await asyncio.to_thread(raw_round, b, a))
            await asyncio.sleep(1.0)
        report(ours, raw)
    finally:
        a.terminate()
        b.terminate()


def report(ours: list[tuple[float, int | None]], raw: list[tuple[float, int | None]]) -> None:
    def med(values: list[float]) -> float:
        return statistics.median(values) if values else float("nan")

    t_ours, t_raw = med([t for t, _ in ours]), med([t for t, _ in raw])
    d_ours = med([float(d) for _, d in ours if d is not None])
    d_raw = med([float(d) for _, d in raw if d is not None])
    print(f"rounds: {len(ours)} (each: launcher A→B, then raw libvirt B→A)")
    print(
        f"  total   launcher {t_ours * 1000:.0f} ms   raw {t_raw * 1000:.0f} ms   "
        f"→ {t_ours / t_raw:.2f}x (target ≤ 1.5x): {'ok' if t_ours <= 1.5 * t_raw else 'MISSED'}"
    )
    print(f"  downtime launcher {d_ours:.0f} ms   raw {d_raw:.0f} ms   "
          f"(target ≤ 100 ms): {'ok' if d_ours <= 100 else 'MISSED'}")  # fmt: skip
    print(f"  launcher rounds: {[(round(t, 3), d) for t, d in ours]}")
    print(f"  raw rounds:      {[(round(t, 3), d) for t, d in raw]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"kubevirt-py migration benchmark ({os.cpu_count()} cores, TCG guest, 128 MiB)")
    run_stoppable(lambda scratch: uvloop.run(run(args.rounds, scratch)))


if __name__ == "__main__":
    main()
