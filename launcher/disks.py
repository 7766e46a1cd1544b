"""Helpers every volume source module shares (launcher/volumes): where disks may live,
path containment, sparse files within the space the node has, external tools, and the
copies of the pod's init containers (containerDisk, kernelBoot).

Every path that comes from the spec is checked to stay under the directory the pod
mounted for it; user data is written to files and handed to tools as file names, never
through a shell. The launcher never looks at an image itself.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from launcher.errors import DiskFailure, ImageNotFound
from shared import podlayout

# KubeVirt's default lessPVCSpaceToleration: a disk may be made up to 10 % smaller than
# asked when the volume is that much short of space.
SPACE_TOLERATION = 0.10
SECTOR = 512


@dataclass(frozen=True, slots=True, kw_only=True)
class DiskContext:
    """Where disks may live and be made."""

    work_dir: Path
    container_disks: Path  # the pod's container-disks volume (podlayout.CONTAINER_DISKS_DIR)
    # Where the pod mounts containerDisk/kernelBoot images as image volumes (podlayout).
    image_volumes: Path = Path(podlayout.IMAGE_VOLUMES_DIR)
    vmi_disks: Path  # where PVC and hostDisk volumes are mounted (podlayout.VMI_DISKS_DIR)
    claim_capacities: Mapping[str, int] = field(default_factory=dict)  # volume → bytes
    space_toleration: float = SPACE_TOLERATION
    incoming: bool = False  # a migration target: shared disks must exist, none is made
    # where block-mode claims' devices are (podlayout.BLOCK_DEVICES_DIR)
    block_devices: Path = Path(podlayout.BLOCK_DEVICES_DIR)

    def block_device_of(self, volume: str) -> Path:
        """Where a block-mode claim's device node is (the pod's volumeDevices)."""
        return self.block_devices / podlayout.block_device(volume)

    def mount_of(self, volume: str) -> Path:
        """The directory a PVC or hostDisk volume is mounted at."""
        return self.vmi_disks / podlayout.vmi_disk_dir(volume)

    def config_mount_of(self, kind_subdir: str, volume: str) -> Path:
        """The directory a config volume (or a cloud-init Secret) is mounted at: under
        the private dir, which holds vmi_disks too (podlayout)."""
        return self.vmi_disks.parent / podlayout.config_dir(kind_subdir, volume)

    def access_cred_dir(self, secret_name: str) -> Path:
        """Where an access credential's Secret is mounted (secret/<name>-access-cred)."""
        return self.config_mount_of(
            podlayout.SECRET_SUBDIR, secret_name + podlayout.ACCESS_CRED_SUFFIX
        )


def contained(path: str, roots: tuple[Path, ...], *, field: str) -> Path:
    """``path`` resolved, refusing anything outside ``roots`` (symlinks included)."""
    candidate = Path(path)
    if not candidate.is_absolute() or ".." in candidate.parts:
        raise DiskFailure(f"{field}: {path!r} must be an absolute path without '..'")
    resolved = candidate.resolve()
    if not any(resolved.is_relative_to(root.resolve()) for root in roots):
        allowed = ", ".join(str(r) for r in roots)
        raise DiskFailure(f"{field}: {path!r} is outside the pod's disk roots ({allowed})")
    return resolved


def make_sparse(path: Path, size: int, *, field: str, toleration: float) -> int:
    """Make ``path`` a sparse file of ``size`` bytes (rounded down to sectors).

    When the filesystem has less space than that, but no more than ``toleration`` less,
    the file gets what is available (KubeVirt's rule); short of more, DiskFailure naming
    both figures. Returns the size made. Never overwrites a file.
    """
    stat = os.statvfs(path.parent)
    available = stat.f_bavail * stat.f_frsize
    if size > available:
        if size * (1 - toleration) > available:
            raise DiskFailure(
                f"{field}: not enough space to create {path.name}: {size} bytes demanded, "
                f"{available} bytes available on the node (also after a "
                f"{toleration:.0%} toleration)"
            )
        size = available
    size -= size % SECTOR
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o660)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)
    return size


def direct_io(path: Path) -> bool:
    """Whether the file can be opened with O_DIRECT (QEMU's cache=none needs it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        return False
    os.close(fd)
    return True


def format_of(path: Path) -> str:
    """qcow2 when the file starts with its magic, raw otherwise."""
    with path.open("rb") as f:
        return "qcow2" if f.read(4) == b"QFI\xfb" else "raw"


def _copied(ctx: DiskContext, rel: PurePosixPath, *, field: str, image: str) -> Path:
    path = ctx.container_disks / rel
    if not path.is_file():
        raise ImageNotFound(
            f"{field}: {path} is missing: the pod's init container did not copy it "
            f"from image {image!r}"
        )
    return path


def _in_image(ctx: DiskContext, volume: str | None, path: str, *, field: str, image: str) -> Path:
    """A file of an image mounted as an image volume, refusing paths that leave it."""
    root = ctx.image_volumes / podlayout.image_volume_dir(volume)
    rel = PurePosixPath(path)
    target = (root / rel.relative_to(rel.anchor)).resolve() if rel.is_absolute() else None
    if target is None or ".." in rel.parts or not target.is_relative_to(root.resolve()):
        raise DiskFailure(f"{field}: {path!r} must be an absolute path inside image {image!r}")
    if not target.is_file():
        raise ImageNotFound(f"{field}: image {image!r} has no file {path!r}")
    return target


def _mounted(ctx: DiskContext, volume: str | None) -> bool:
    """The pod mounts this image as an image volume (else its files were copied)."""
    return (ctx.image_volumes / podlayout.image_volume_dir(volume)).is_dir()


def container_disk_file(
    ctx: DiskContext, volume: str, *, field: str, image: str, path: str | None = None
) -> Path:
    """A containerDisk volume's disk image: in its image volume (``path``, else the one
    file under /disk), or the copy the pod's init container made."""
    if not _mounted(ctx, volume):
        return _copied(ctx, podlayout.disk_file(volume), field=field, image=image)
    if path:
        return _in_image(ctx, volume, path, field=f"{field}.path", image=image)
    disk_dir = ctx.image_volumes / podlayout.image_volume_dir(volume) / "disk"
    found = sorted(p for p in disk_dir.glob("*") if p.is_file()) if disk_dir.is_dir() else []
    if len(found) != 1:
        raise ImageNotFound(
            f"{field}: image {image!r} must hold one file under /disk, found {len(found)}"
        )
    return found[0]


def kernel_boot_files(
    ctx: DiskContext, *, kernel: str | None, initrd: str | None, field: str, image: str
) -> tuple[Path | None, Path | None]:
    """The kernelBoot container's kernel and initrd (each when the VMI names it): in its
    image volume at those paths, or the copies the pod's init container made."""
    found: list[Path | None] = []
    for path, copy, name in (
        (kernel, podlayout.kernel_file(), "kernelPath"),
        (initrd, podlayout.initrd_file(), "initrdPath"),
    ):
        if not path:
            found.append(None)
        elif _mounted(ctx, None):
            found.append(_in_image(ctx, None, path, field=f"{field}.{name}", image=image))
        else:
            found.append(_copied(ctx, copy, field=f"{field}.{name}", image=image))
    return found[0], found[1]


async def run_tool(*argv: str, what: str) -> None:
    """Run a disk tool (qemu-img, genisoimage) with file-name arguments, under a timeout."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(60):
        _, err = await proc.communicate()
    if proc.returncode != 0:
        raise DiskFailure(f"{what} failed: {err.decode(errors='replace').strip()}")
