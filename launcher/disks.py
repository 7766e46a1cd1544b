"""Guest disks on the launcher's side: cloud-init ISOs, empty disks, host paths, images.

Every path that comes from the spec is checked to stay under the pod's directories; user
data is written to files and handed to tools as file names, never through a shell.
containerDisk and kernelBoot files are where the pod's init containers copied them
(shared/podlayout.py); the launcher never looks at an image itself.
"""

from __future__ import annotations

import asyncio
import base64
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from launcher.errors import DiskFailure, ImageNotFound
from shared import podlayout
from shared.model import VirtualMachineInstance
from shared.model.quantity import parse_bytes
from shared.model.volumes import CloudInitNoCloudSource, HostDiskSource


@dataclass(frozen=True, slots=True, kw_only=True)
class DiskContext:
    """Where disks may live and be made."""

    work_dir: Path
    disk_roots: tuple[Path, ...]
    container_disks: Path  # the pod's container-disks volume (podlayout.CONTAINER_DISKS_DIR)


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


def _copied(ctx: DiskContext, rel: PurePosixPath, *, field: str, image: str) -> Path:
    path = ctx.container_disks / rel
    if not path.is_file():
        raise ImageNotFound(
            f"{field}: {path} is missing: the pod's init container did not copy it "
            f"from image {image!r}"
        )
    return path


def container_disk_file(ctx: DiskContext, volume: str, *, field: str, image: str) -> Path:
    """The copy of a containerDisk volume's disk image."""
    return _copied(ctx, podlayout.disk_file(volume), field=field, image=image)


def kernel_boot_files(
    ctx: DiskContext, *, kernel: bool, initrd: bool, field: str, image: str
) -> tuple[Path | None, Path | None]:
    """The copies of the kernelBoot container's kernel and initrd (each when the VMI
    names it)."""
    return (
        _copied(ctx, podlayout.kernel_file(), field=f"{field}.kernelPath", image=image)
        if kernel
        else None,
        _copied(ctx, podlayout.initrd_file(), field=f"{field}.initrdPath", image=image)
        if initrd
        else None,
    )


async def _run(*argv: str, what: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(60):
        _, err = await proc.communicate()
    if proc.returncode != 0:
        raise DiskFailure(f"{what} failed: {err.decode(errors='replace').strip()}")


def _decoded(text: str | None, b64: str | None) -> bytes | None:
    if b64 is not None:
        return base64.b64decode(b64)
    return None if text is None else text.encode()


async def cloud_init_iso(
    vmi: VirtualMachineInstance, source: CloudInitNoCloudSource, *, ctx: DiskContext, volume: str
) -> Path:
    """Build the NoCloud ISO (volume label cidata) for one volume."""
    data_dir = ctx.work_dir / f"cloud-init-{volume}"
    data_dir.mkdir(parents=True, exist_ok=True)
    user = _decoded(source.user_data, source.user_data_base64) or b""
    network = _decoded(source.network_data, source.extra.get("networkDataBase64"))
    (data_dir / "user-data").write_bytes(user)
    meta = f"instance-id: {vmi.metadata.uid or vmi.metadata.name}\n"
    meta += f"local-hostname: {vmi.metadata.name}\n"
    (data_dir / "meta-data").write_text(meta)
    if network is not None:
        (data_dir / "network-config").write_bytes(network)
    iso = ctx.work_dir / f"{volume}-cloudinit.iso"
    await _run(
        "genisoimage", "-quiet", "-output", str(iso), "-volid", "cidata", "-joliet", "-rock",
        str(data_dir), what="building the cloud-init ISO",
    )  # fmt: skip
    return iso


async def empty_disk(capacity: str | int | None, *, ctx: DiskContext, volume: str) -> Path:
    """A qcow2 of ``capacity`` made on first start and kept across restarts of the pod."""
    path = ctx.work_dir / f"{volume}-empty.qcow2"
    if not path.exists():
        size = parse_bytes(capacity if capacity is not None else "0")
        await _run(
            "qemu-img", "create", "-q", "-f", "qcow2", str(path), str(size),
            what="creating the empty disk",
        )  # fmt: skip
    return path


async def container_disk_overlay(image: Path, *, fmt: str, ctx: DiskContext, volume: str) -> Path:
    """An ephemeral qcow2 overlay over the image's disk, as KubeVirt does for containerDisks.

    The image stays a read-only backing file, so many VMs can share one image.
    """
    overlay = ctx.work_dir / f"{volume}-overlay.qcow2"
    if not overlay.exists():
        await _run(
            "qemu-img", "create", "-q", "-f", "qcow2", "-F", fmt, "-b", str(image), str(overlay),
            what="creating the containerDisk overlay",
        )  # fmt: skip
    return overlay


def host_disk(source: HostDiskSource, *, ctx: DiskContext, field: str) -> Path:
    """A hostDisk path under the disk roots; DiskOrCreate makes a sparse file of capacity."""
    path = contained(source.path or "", ctx.disk_roots, field=f"{field}.path")
    if path.exists():
        return path
    if str(source.type) != "DiskOrCreate":
        raise DiskFailure(f"{field}.path: {source.path} does not exist (type {source.type})")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        os.truncate(f.fileno(), parse_bytes(source.capacity or 0))
    return path


def pvc_disk(claim: str, *, ctx: DiskContext, field: str) -> Path:
    """A PVC's disk image, mounted (as KubeVirt does) at <root>/vmi-disks/<claim>/disk.img."""
    for root in ctx.disk_roots:
        candidate = root / "vmi-disks" / claim / "disk.img"
        if candidate.is_file():
            return contained(str(candidate), ctx.disk_roots, field=field)
    raise DiskFailure(f"{field}: no disk.img for claim {claim!r} under the pod's volumes")
