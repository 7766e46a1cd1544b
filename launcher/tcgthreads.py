"""Single-threaded TCG for emulated domains that may gain vCPUs (docs/live-change.md).

QEMU 7.2's multi-threaded TCG (MTTCG, one host thread per vCPU) aborts when a vCPU is
hot-added to a domain libvirt runs (`tcg/region.c:372: tcg_region_initial_alloc__locked:
assertion failed`): the translation buffer is cut into regions at start and the new
vCPU's thread finds none left for it. With single-threaded (round-robin) TCG all vCPUs
share one thread and its region, so a hot-added vCPU needs nothing new.

libvirt 9.0 cannot ask for it: it writes `-accel tcg[,tb-size=N]` itself, QEMU uses the
first `-accel` that works (a second one from `<qemu:commandline>` is ignored), and
`-global tcg-accel.thread=single` is refused ("invalid class name": globals apply to
devices). `-icount` would turn MTTCG off too but made the test guest boot 3.6 s slower.
So such a domain's `<emulator>` is a small wrapper, written by the launcher, that adds
`thread=single` to libvirt's `-accel tcg` and runs QEMU.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from pathlib import Path

QEMU = Path("/usr/bin/qemu-system-x86_64")
WRAPPER_NAME = "qemu-tcg-single"


def needed(*, virt_type: str, vcpus_max: int, vcpus_current: int | None) -> bool:
    """True for an emulated domain whose vCPUs may be hot-added (fewer online than most)."""
    return virt_type == "qemu" and vcpus_current is not None and vcpus_current < vcpus_max


def wrapper_script(qemu: Path = QEMU) -> str:
    """A POSIX shell script: QEMU with `,thread=single` after the `-accel tcg…` argument."""
    return f"""#!/bin/sh
# Written by virt-launcher-py: QEMU with single-threaded TCG (launcher/tcgthreads.py).
accel=
for arg do
    shift
    if [ -n "$accel" ]; then
        case $arg in tcg|tcg,*) arg="$arg,thread=single" ;; esac
    fi
    accel=
    [ "$arg" = -accel ] && accel=1
    set -- "$@" "$arg"
done
exec {shlex.quote(str(qemu))} "$@"
"""


def write_wrapper(directory: Path, qemu: Path = QEMU) -> Path:
    """The wrapper in `directory` (readable and runnable by QEMU's user); its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / WRAPPER_NAME
    path.write_text(wrapper_script(qemu))
    path.chmod(0o755)
    return path


def _cache_file(cache: Path, emulator: Path) -> Path:
    """libvirt's capability cache file of an emulator (named by its path's SHA-256)."""
    return cache / f"{hashlib.sha256(str(emulator).encode()).hexdigest()}.xml"


def seed_capabilities(cache: Path, wrapper: Path, qemu: Path = QEMU) -> bool:
    """The wrapper's entry in libvirt's capability cache, made from QEMU's (they differ
    only in the emulator's path and ctime), so libvirt does not probe QEMU again through
    the wrapper (≈ 0.7 s); False when QEMU's entry is not there."""
    try:
        text = _cache_file(cache, qemu).read_text()
    except OSError:
        return False
    ctime = int(wrapper.stat().st_ctime)
    text = text.replace(
        f"<emulator>{_xml_text(qemu)}</emulator>", f"<emulator>{_xml_text(wrapper)}</emulator>"
    )
    text = re.sub(r"<qemuctime>\d+</qemuctime>", f"<qemuctime>{ctime}</qemuctime>", text, count=1)
    target = _cache_file(cache, wrapper)
    target.write_text(text)
    target.chmod(0o600)
    return True


def _xml_text(path: Path) -> str:
    """A path as XML character data. Not xml.sax.saxutils.escape: that module loads urllib,
    http.client and ssl, and this module is on the launcher's start path (launcher.app)."""
    return str(path).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
