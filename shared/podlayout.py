"""The launcher pod's layout: the one contract between the controller's pod template and
the launcher inside the pod (volume names, mount paths, file names, init containers).

containerDisk and kernelBoot files come from real container images, as KubeVirt ships
them (a scratch image with the disk as the one file under ``/disk/``, kernel and initrd at
the paths the VMI names). Such an image has no shell and no ``cp``, so the pod copies:

1. init container ``container-disk-binary`` runs the launcher image and copies its static
   busybox into the ``container-disk-binary`` emptyDir (``BINARY_DIR``);
2. one init container per containerDisk volume (``volume<name>``) and one for kernelBoot
   (``kernel-boot``) run the user's image with that busybox as the command and copy the
   files into the ``container-disks`` emptyDir, under ``<volume>/disk`` and
   ``kernel_boot/{kernel,initrd}``;
3. the compute container mounts ``container-disks`` read-only at ``CONTAINER_DISKS_DIR``;
   the launcher's qcow2 overlay (in its private dir) uses the copy as its backing file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

# Volumes of the launcher pod and where the compute container mounts them.
SOCKETS_VOLUME = "sockets"
SOCKETS_DIR = "/var/run/kubevirt/sockets"
PRIVATE_VOLUME = "private"
PRIVATE_DIR = "/var/run/kubevirt-private"
NOTIFY_VOLUME = "notify"
NOTIFY_SOCKET_NAME = "domain-notify.sock"
CONTAINER_DISKS_VOLUME = "container-disks"
CONTAINER_DISKS_DIR = "/var/run/kubevirt/container-disks"
BINARY_VOLUME = "container-disk-binary"
BINARY_DIR = "/var/run/kubevirt/container-disk-binary"

# The launcher image carries a static busybox here (Debian's busybox-static).
LAUNCHER_BUSYBOX = "/bin/busybox"
BUSYBOX = f"{BINARY_DIR}/busybox"
BINARY_INIT_CONTAINER = "container-disk-binary"
KERNEL_BOOT_INIT_CONTAINER = "kernel-boot"

# Under CONTAINER_DISKS_DIR: `<volume>/DISK_FILE` and `KERNEL_BOOT_DIR/{kernel,initrd}`.
# KERNEL_BOOT_DIR is no DNS-1123 label, so no volume can be named like it.
DISK_FILE = "disk"
KERNEL_BOOT_DIR = "kernel_boot"
KERNEL_FILE = "kernel"
INITRD_FILE = "initrd"
# Where KubeVirt's containerDisk images keep their one disk file.
IMAGE_DISK_DIR = "/disk"

MAX_CONTAINER_NAME = 63

# sh (busybox's) in the user's image: copy each (source, name) pair into the output dir.
# An empty source is the containerDisk convention: the one regular file under /disk.
# Paths arrive as positional arguments, never as code; each copy lands under a temporary
# name and is renamed, so a half-copied file never carries the final name.
COPY_SCRIPT = """set -eu
bb=$1; out=$2; shift 2
"$bb" mkdir -p "$out"
while [ "$#" -ge 2 ]; do
  src=$1; name=$2; shift 2
  if [ -z "$src" ]; then
    n=0
    for f in /disk/*; do
      if [ -f "$f" ]; then n=$((n + 1)); src=$f; fi
    done
    if [ "$n" -ne 1 ]; then
      echo "containerDisk: expected one file under /disk, found $n" >&2; exit 1
    fi
  fi
  "$bb" cp "$src" "$out/$name.part"
  "$bb" mv "$out/$name.part" "$out/$name"
done
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyFile:
    """One file an init container copies: ``source`` in the image (None: the one file
    under /disk) to ``name`` in the output directory."""

    source: str | None
    name: str


def volume_dir(volume: str) -> PurePosixPath:
    """Where a containerDisk volume's copy lives, relative to CONTAINER_DISKS_DIR."""
    return PurePosixPath(volume)


def disk_file(volume: str) -> PurePosixPath:
    return volume_dir(volume) / DISK_FILE


def kernel_file() -> PurePosixPath:
    return PurePosixPath(KERNEL_BOOT_DIR) / KERNEL_FILE


def initrd_file() -> PurePosixPath:
    return PurePosixPath(KERNEL_BOOT_DIR) / INITRD_FILE


def volume_init_container(volume: str) -> str:
    """KubeVirt's ``volume<name>``, cut with a hash suffix to a valid container name."""
    name = f"volume{volume}"
    if len(name) <= MAX_CONTAINER_NAME:
        return name
    digest = hashlib.sha256(volume.encode()).hexdigest()[:8]
    return f"{name[: MAX_CONTAINER_NAME - 9]}-{digest}"


def copy_command(out_dir: PurePosixPath, files: Sequence[CopyFile]) -> list[str]:
    """The init container's command: busybox sh running COPY_SCRIPT on the pairs."""
    pairs = [part for f in files for part in (f.source or "", f.name)]
    out = str(PurePosixPath(CONTAINER_DISKS_DIR) / out_dir)
    return [BUSYBOX, "sh", "-c", COPY_SCRIPT, "copy", BUSYBOX, out, *pairs]
