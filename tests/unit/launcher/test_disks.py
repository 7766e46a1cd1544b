"""Disk paths from the spec stay inside the pod; containerDisk and kernelBoot files are
the copies the pod's init containers made, under podlayout's names."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.disks import (
    DiskContext,
    contained,
    container_disk_file,
    host_disk,
    kernel_boot_files,
)
from launcher.errors import DiskFailure, ImageNotFound
from shared import podlayout
from shared.model.enums import HostDiskType
from shared.model.volumes import HostDiskSource


def _ctx(tmp_path: Path) -> DiskContext:
    return DiskContext(
        work_dir=tmp_path, disk_roots=(tmp_path,), container_disks=tmp_path / "container-disks"
    )


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("relative/disk.img", id="relative"),
        pytest.param("{root}/../etc/passwd", id="dotdot"),
        pytest.param("/etc/passwd", id="outside"),
        pytest.param("{root}/link/passwd", id="symlink-out"),
    ],
)
def test_contained_refuses_escapes(tmp_path: Path, path: str) -> None:
    """Relative paths, '..', paths outside the roots and symlinks out of them are refused."""
    (tmp_path / "link").symlink_to("/etc")
    with pytest.raises(DiskFailure, match=r"spec\.volumes"):
        contained(path.format(root=tmp_path), (tmp_path,), field="spec.volumes[0].hostDisk.path")


def test_contained_accepts_paths_inside(tmp_path: Path) -> None:
    """A plain path under a root resolves to itself."""
    assert (
        contained(str(tmp_path / "a" / "disk.img"), (tmp_path,), field="f")
        == tmp_path / "a" / "disk.img"
    )


def test_host_disk_or_create_makes_a_sparse_file(tmp_path: Path) -> None:
    """DiskOrCreate makes a sparse file of the capacity; Disk requires it to exist."""
    ctx = _ctx(tmp_path)
    target = tmp_path / "d" / "x.img"
    source = HostDiskSource(path=str(target), type=HostDiskType.DISK_OR_CREATE, capacity="1Mi")
    assert host_disk(source, ctx=ctx, field="v") == target
    assert target.stat().st_size == 1024 * 1024
    missing = HostDiskSource(path=str(tmp_path / "none.img"), type=HostDiskType.DISK)
    with pytest.raises(DiskFailure, match="does not exist"):
        host_disk(missing, ctx=ctx, field="v")


def test_container_disk_and_kernel_resolve_to_the_init_containers_copies(tmp_path: Path) -> None:
    """A containerDisk volume is `<container-disks>/<volume>/disk`; kernel and initrd are
    under kernel_boot/, each only when the VMI names it."""
    ctx = _ctx(tmp_path)
    for rel in (podlayout.disk_file("root"), podlayout.kernel_file(), podlayout.initrd_file()):
        (ctx.container_disks / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx.container_disks / rel).write_bytes(b"x")
    disk = container_disk_file(ctx, "root", field="f", image="i")
    assert disk == tmp_path / "container-disks" / "root" / "disk"
    kernel, initrd = kernel_boot_files(ctx, kernel=True, initrd=False, field="f", image="i")
    assert kernel == tmp_path / "container-disks" / "kernel_boot" / "kernel"
    assert initrd is None
    _, initrd = kernel_boot_files(ctx, kernel=False, initrd=True, field="f", image="i")
    assert initrd == tmp_path / "container-disks" / "kernel_boot" / "initrd"


def test_a_copy_the_pod_lacks_is_image_not_found(tmp_path: Path) -> None:
    """No copy for the volume (its init container never ran): ImageNotFound naming the
    field, the path and the image."""
    ctx = _ctx(tmp_path)
    with pytest.raises(ImageNotFound, match=r"spec\.volumes\[0\].*other/disk.*r/img:v1"):
        container_disk_file(ctx, "other", field="spec.volumes[0]", image="r/img:v1")
    with pytest.raises(ImageNotFound, match="kernelPath"):
        kernel_boot_files(ctx, kernel=True, initrd=True, field="k", image="r/img:v1")
