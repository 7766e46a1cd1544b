"""The restore path of push-mode backups (docs/backup.md): a full backup and the
incremental ones after it, chained and flattened into one raw disk image.

Each backup directory on the target claim holds `<volume>.qcow2` per disk. A full one is
self-contained; an incremental one holds only the clusters written since its base
checkpoint, and libvirt recorded the live disk (a path inside the launcher) as its
backing file. Restoring chains each incremental onto the one before it with an unsafe
rebase (only the header changes: the data is already relative to that base), then reads
through the chain into a raw file, which is a claim's `disk.img` as KubeVirt lays it out:

    cp full/v.qcow2 0.qcow2; cp inc1/v.qcow2 1.qcow2; …          (the backups stay as they are)
    qemu-img rebase -u -F qcow2 -b 0.qcow2 1.qcow2; …
    qemu-img convert -O raw <last>.qcow2 disk.img

`restore_script` writes exactly that as a POSIX shell script (busybox sh runs it, in any
pod with qemu-img, such as one of the launcher image mounting the claim).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath


def restore_script(backups: Sequence[str], *, volume: str, work_dir: str, output: str) -> str:
    """The shell script restoring `volume` from backup directories, full one first."""
    if not backups:
        raise ValueError("at least the full backup is needed")
    work = PurePosixPath(work_dir)
    links = [str(work / f"{i}.qcow2") for i in range(len(backups))]
    lines = ["set -eu", f"mkdir -p {shlex.quote(work_dir)}"]
    for backup, link in zip(backups, links, strict=True):
        source = str(PurePosixPath(backup) / f"{volume}.qcow2")
        lines.append(f"cp {shlex.quote(source)} {shlex.quote(link)}")
    for i in range(1, len(links)):
        base = f"{i - 1}.qcow2"  # relative: resolved beside the image
        lines.append(f"qemu-img rebase -u -F qcow2 -b {base} {shlex.quote(links[i])}")
    lines.append(f"qemu-img convert -O raw {shlex.quote(links[-1])} {shlex.quote(output)}")
    return "\n".join(lines) + "\n"
