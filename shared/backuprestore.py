"""The restore path of push-mode backups (docs/backup.md): a full backup and the
incremental ones after it, chained and flattened into one raw disk image.

Each backup directory on the target claim holds `<volume>.qcow2` per disk. A full one is
self-contained; an incremental one holds only the clusters written since its base
checkpoint, and libvirt recorded the live disk (a path inside the launcher) as its
backing file. Restoring chains each incremental onto the one before it with an unsafe
rebase (only the header changes: the data is already relative to that base), then reads
through the chain into a raw file, which is a claim's `disk.img` as KubeVirt lays it out:

    cp full/v.qcow2 0.qcow2; cp inc1/v.qcow2 1.qcow2; …          (the backups stay as they are)
    qemu-img rebase -u -F qcow2 -b 0.qcow2 1.qcow2; …      (only files that have a backing file)
    qemu-img convert -O raw <last>.qcow2 disk.img

A file without a backing file is a full copy of its disk (a full backup's, or a raw disk's,
which every backup copies whole): the chain restarts there, nothing is rebased under it.

`restore_script` writes exactly that as a POSIX shell script (busybox sh runs it, in any
pod with qemu-img, such as one of the launcher image mounting the claim).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath


def restore_script(backups: Sequence[str], *, volume: str, work_dir: str, output: str) -> str:
    """The shell script restoring `volume` from backup directories, oldest (a full one)
    first. A file without a backing file is a full copy (every disk of a full backup, and
    raw disks in every backup): the chain restarts at it. An incremental file is rebased
    onto the file before it."""
    if not backups:
        raise ValueError("at least the full backup is needed")
    sources = " ".join(shlex.quote(str(PurePosixPath(b) / f"{volume}.qcow2")) for b in backups)
    work, out = shlex.quote(work_dir), shlex.quote(output)
    return f"""set -eu
mkdir -p {work}
n=0
prev=
for src in {sources}; do
  cp "$src" {work}/$n.qcow2
  if qemu-img info {work}/$n.qcow2 | grep -q '^backing file:'; then
    [ -n "$prev" ] || {{ echo "$src is incremental: the full backup must come first" >&2; exit 1; }}
    qemu-img rebase -u -F qcow2 -b "$prev" {work}/$n.qcow2
  fi
  prev=$n.qcow2
  n=$((n + 1))
done
qemu-img convert -O raw {work}/$((n - 1)).qcow2 {out}
"""
