"""`python -m launcher.seed --out DIR`: probe QEMU once with the launcher's own libvirtd and
leave libvirt's QEMU capability cache in DIR, for every launcher on the node to start
from (`--capabilities-seed`, mounted read-only), instead of each paying the probe.

virt-handler's `qemu-capabilities` init container runs this with the launcher image, so
the cache is made by the same QEMU and libvirtd the launchers run, unpacked once on this
node (libvirt keys the cache on their ctimes). A cache libvirt judges stale (another
launcher image, /dev/kvm given to launchers but not here) is probed again as without a
seed: the seed can make a start faster, never different. It is written by the handler's
pod, never by a launcher, so no guest's pod can change what another one starts from.
It also leaves the node labeller's CPU documents in DIR/node-labeller (launcher/nodecpu.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import structlog
import uvloop

from launcher.daemonpaths import DaemonPaths, Isolation, choose_isolation
from launcher.errors import LibvirtFailure
from launcher.libvirtd import LibvirtDaemon
from launcher.nodecpu import virt_type, write_documents
from launcher.virt import Virt
from shared import cpulabels, logs, podlayout

log = structlog.get_logger("launcher.seed")


async def produce(out: Path, *, libvirtd: Path, tini: Path, run_as: int | None = None) -> int:
    """Probe in a scratch dir and replace `out`'s files with the cache; how many files.

    `run_as` (from root): probe with a session daemon of that user, as non-root
    launchers run theirs (libvirt judges a cache by what its user may open)."""
    as_user = run_as is not None and os.geteuid() == 0
    isolation = Isolation.SESSION if as_user else choose_isolation()
    with tempfile.TemporaryDirectory(prefix="kvseed", dir="/tmp") as work:
        if as_user:
            os.chmod(work, 0o755)  # the daemon's user reaches its root under it
        daemon = LibvirtDaemon(
            paths=DaemonPaths(root=Path(work) / "libvirt", isolation=isolation),
            libvirtd=libvirtd,
            tini=tini,
            run_as=run_as if as_user else None,
        )
        daemon.prepare(capabilities_seed=None, cgroups=False)
        await daemon.start()
        try:
            virt = await Virt.open(daemon.paths.uri)
            try:
                await virt.warm_up()
                await _node_cpu(virt, out / cpulabels.NODE_CPU_DIR)
            finally:
                await virt.close()
        finally:
            await daemon.stop()
        return replace_files(daemon.paths.capabilities, out)


async def _node_cpu(virt: Virt, out: Path) -> None:
    """The node labeller's documents (launcher/nodecpu.py); without them the node only
    goes unlabelled, so a failure here does not cost the seed."""
    try:
        await write_documents(virt, out, kind=virt_type())
    except (LibvirtFailure, OSError, ET.ParseError) as e:
        log.warning("node_cpu_documents_failed", error=str(e))


def replace_files(source: Path, out: Path) -> int:
    """Every file of `source` into `out`, each by an atomic rename (a launcher copying the
    seed meanwhile sees an old file or a new one, never half of one); files `source` lacks
    are removed."""
    out.mkdir(parents=True, exist_ok=True)
    names = {p.name for p in source.iterdir() if p.is_file()} if source.is_dir() else set()
    for name in sorted(names):
        tmp = out / f".{name}.{os.getpid()}"
        shutil.copy2(source / name, tmp)
        tmp.chmod(0o644)  # libvirt writes 0600; launchers of any user read the seed
        tmp.replace(out / name)
    for stale in out.iterdir():
        if stale.is_file() and stale.name not in names:
            stale.unlink(missing_ok=True)
    return len(names)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="launcher.seed", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=Path(podlayout.QEMU_CAPABILITIES_SEED_DIR))
    p.add_argument("--libvirtd", type=Path, default=Path("/usr/sbin/libvirtd"))
    p.add_argument("--tini", type=Path, default=Path("/usr/bin/tini"))
    p.add_argument(
        "--run-as", type=int, default=None, help="probe as this uid (a session daemon), from root"
    )
    p.add_argument("--log-format", choices=["json", "console"], default="json")
    return p


def main(argv: list[str] | None = None) -> None:
    ns = _parser().parse_args(argv)
    logs.configure(ns.log_format)
    try:
        files = uvloop.run(produce(ns.out, libvirtd=ns.libvirtd, tini=ns.tini, run_as=ns.run_as))
    except Exception as e:  # a seed only makes starts faster: never keep the handler down
        log.warning("qemu_capabilities_not_seeded", error=repr(e))
    else:
        log.info("qemu_capabilities_seeded", out=str(ns.out), files=files)


if __name__ == "__main__":
    main()
