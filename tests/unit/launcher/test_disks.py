"""Disk paths from the spec stay inside the pod; images resolve only inside the store."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from launcher.disks import DiskContext, contained, host_disk, image_file
from launcher.errors import DiskFailure, ImageNotFound
from shared.images import ImageStore
from shared.model.enums import HostDiskType
from shared.model.volumes import HostDiskSource


def _register(root: Path, ref: str, files: dict[str, bytes]) -> ImageStore:
    entry = root / hashlib.sha256(ref.encode()).hexdigest()[:16]
    for rel, data in files.items():
        (entry / "rootfs" / rel).parent.mkdir(parents=True, exist_ok=True)
        (entry / "rootfs" / rel).write_bytes(data)
    (entry / "ref").write_text(ref)
    return ImageStore(root)


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
    ctx = DiskContext(work_dir=tmp_path, disk_roots=(tmp_path,), images=ImageStore(tmp_path))
    target = tmp_path / "d" / "x.img"
    source = HostDiskSource(path=str(target), type=HostDiskType.DISK_OR_CREATE, capacity="1Mi")
    assert host_disk(source, ctx=ctx, field="v") == target
    assert target.stat().st_size == 1024 * 1024
    missing = HostDiskSource(path=str(tmp_path / "none.img"), type=HostDiskType.DISK)
    with pytest.raises(DiskFailure, match="does not exist"):
        host_disk(missing, ctx=ctx, field="v")


def test_image_files_resolve_inside_the_image(tmp_path: Path) -> None:
    """Files resolve inside the image; '..' and unknown images are typed errors."""
    store = _register(tmp_path, "r/img:v1", {"boot/vmlinuz": b"k", "disk/a.qcow2": b"d"})
    assert image_file(store, "r/img:v1", "/boot/vmlinuz", field="f").read_bytes() == b"k"
    assert image_file(store, "r/img:v1", None, field="f").name == "a.qcow2"
    with pytest.raises(ImageNotFound, match="escapes"):
        image_file(store, "r/img:v1", "/boot/../../ref", field="f")
    with pytest.raises(ImageNotFound, match="not in the local image store"):
        image_file(store, "r/other:v1", "/boot/vmlinuz", field="f")
