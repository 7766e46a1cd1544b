"""Disk paths from the spec stay inside the pod; containerDisk and kernelBoot files are
read in their image volumes (or, the fallback, the copies the pod's init containers made,
under podlayout's names)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from launcher.disks import (
    DiskContext,
    contained,
    container_disk_file,
    kernel_boot_files,
    make_sparse,
)
from launcher.errors import DiskFailure, ImageNotFound
from shared import podlayout


def _ctx(tmp_path: Path) -> DiskContext:
    return DiskContext(
        work_dir=tmp_path,
        container_disks=tmp_path / "container-disks",
        vmi_disks=tmp_path / "vmi-disks",
        image_volumes=tmp_path / "image-volumes",
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


def test_make_sparse_makes_a_sparse_file_of_the_size(tmp_path: Path) -> None:
    """The file gets the size asked (rounded down to sectors) and takes no blocks; an
    existing file is never overwritten."""
    target = tmp_path / "x.img"
    assert make_sparse(target, 1024 * 1024 + 7, field="f", toleration=0.1) == 1024 * 1024
    assert target.stat().st_size == 1024 * 1024
    assert target.stat().st_blocks == 0
    with pytest.raises(FileExistsError):
        make_sparse(target, 512, field="f", toleration=0.1)


def test_make_sparse_refuses_more_than_the_node_holds(tmp_path: Path) -> None:
    """A size beyond the filesystem's free space (and the toleration) is refused naming
    the field and both figures, and no file is left."""
    target = tmp_path / "huge.img"
    with pytest.raises(DiskFailure, match=r"spec\.volumes\[0\]\.hostDisk\.capacity: not enough"):
        make_sparse(target, 2**62, field="spec.volumes[0].hostDisk.capacity", toleration=0.1)
    assert not target.exists()


def test_make_sparse_shrinks_within_the_toleration(tmp_path: Path) -> None:
    """Short of space by less than the toleration, the file gets what is available."""
    stat = os.statvfs(tmp_path)
    available = stat.f_bavail * stat.f_frsize
    made = make_sparse(tmp_path / "t.img", available + 4096, field="f", toleration=0.5)
    assert available - 2 * 1024 * 1024 <= made <= available


def test_container_disk_and_kernel_resolve_to_the_init_containers_copies(tmp_path: Path) -> None:
    """A containerDisk volume is `<container-disks>/<volume>/disk`; kernel and initrd are
    under kernel_boot/, each only when the VMI names it."""
    ctx = _ctx(tmp_path)
    for rel in (podlayout.disk_file("root"), podlayout.kernel_file(), podlayout.initrd_file()):
        (ctx.container_disks / rel).parent.mkdir(parents=True, exist_ok=True)
        (ctx.container_disks / rel).write_bytes(b"x")
    disk = container_disk_file(ctx, "root", field="f", image="i")
    assert disk == tmp_path / "container-disks" / "root" / "disk"
    kernel, initrd = kernel_boot_files(ctx, kernel="/k", initrd=None, field="f", image="i")
    assert kernel == tmp_path / "container-disks" / "kernel_boot" / "kernel"
    assert initrd is None
    _, initrd = kernel_boot_files(ctx, kernel=None, initrd="/i", field="f", image="i")
    assert initrd == tmp_path / "container-disks" / "kernel_boot" / "initrd"


def test_a_copy_the_pod_lacks_is_image_not_found(tmp_path: Path) -> None:
    """No copy for the volume (its init container never ran): ImageNotFound naming the
    field, the path and the image."""
    ctx = _ctx(tmp_path)
    with pytest.raises(ImageNotFound, match=r"spec\.volumes\[0\].*other/disk.*r/img:v1"):
        container_disk_file(ctx, "other", field="spec.volumes[0]", image="r/img:v1")
    with pytest.raises(ImageNotFound, match="kernelPath"):
        kernel_boot_files(ctx, kernel="/k", initrd="/i", field="k", image="r/img:v1")


def _image(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def test_image_volumes_are_read_in_place(tmp_path: Path) -> None:
    """A mounted containerDisk image gives the one file under /disk (or its `path`); a
    mounted kernelBoot image gives kernel and initrd at their image paths: no copy."""
    ctx = _ctx(tmp_path)
    _image(ctx.image_volumes / "root", {"disk/tiny.qcow2": b"q", "other/raw.img": b"r"})
    _image(ctx.image_volumes / "kernel_boot", {"boot/vmlinuz": b"k", "boot/initrd": b"i"})
    disk = container_disk_file(ctx, "root", field="f", image="i")
    assert disk == ctx.image_volumes / "root" / "disk" / "tiny.qcow2"
    named = container_disk_file(ctx, "root", field="f", image="i", path="/other/raw.img")
    assert named == ctx.image_volumes / "root" / "other" / "raw.img"
    kernel, initrd = kernel_boot_files(
        ctx, kernel="/boot/vmlinuz", initrd="/boot/initrd", field="f", image="i"
    )
    assert kernel == ctx.image_volumes / "kernel_boot" / "boot" / "vmlinuz"
    assert initrd == ctx.image_volumes / "kernel_boot" / "boot" / "initrd"
    assert not ctx.container_disks.exists()


def test_image_volume_paths_stay_inside_the_image(tmp_path: Path) -> None:
    """A path climbing out of the image, a symlink leaving it, a missing file and an image
    without exactly one file under /disk are refused, naming the field and the image."""
    ctx = _ctx(tmp_path)
    _image(ctx.image_volumes / "root", {"disk/a": b"a", "disk/b": b"b"})
    (tmp_path / "secret").write_bytes(b"s")
    (ctx.image_volumes / "root" / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(ImageNotFound, match=r"f: image 'r/i:1' must hold one file under /disk"):
        container_disk_file(ctx, "root", field="f", image="r/i:1")
    for bad in ("/../../secret", "/link", "relative"):
        with pytest.raises(DiskFailure, match=r"f\.path: .* inside image 'r/i:1'"):
            container_disk_file(ctx, "root", field="f", image="r/i:1", path=bad)
    with pytest.raises(ImageNotFound, match="has no file '/nope'"):
        container_disk_file(ctx, "root", field="f", image="r/i:1", path="/nope")
