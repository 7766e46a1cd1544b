"""The node agent's images: entry-point images run venv programs; images in the local
store are data images whose containers run their own command chrooted into a read-only
view of the image; anything else waits in ErrImagePull."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from localkube.imagestore import ImageStore
from localkube.nodeagent import images
from localkube.nodeagent.refs import ConfigError
from localkube.nodeagent.runtime import Mount, RootView, prologue

PY = Path("/venv/bin/python")
GUEST = "registry.local/kubevirt-py/tiny-guest:v1"


def _store(tmp_path: Path) -> ImageStore:
    entry = tmp_path / "store" / hashlib.sha256(GUEST.encode()).hexdigest()[:16]
    (entry / "rootfs" / "disk").mkdir(parents=True)
    (entry / "rootfs" / "disk" / "disk.qcow2").write_bytes(b"QFI\xfb")
    (entry / "ref").write_text(GUEST)
    return ImageStore(tmp_path / "store")


def test_entry_point_images_run_on_the_host(tmp_path: Path) -> None:
    """The launcher image with an explicit command (the busybox copy) runs that command
    on the host's filesystem: no image root."""
    launch = images.resolve(
        "registry.local/kubevirt-py/virt-launcher:dev",
        ["/bin/busybox", "cp", "/bin/busybox", "/x/busybox"],
        [],
        python=PY,
        store=_store(tmp_path),
    )
    assert launch.rootfs is None
    assert launch.argv == ["/bin/busybox", "cp", "/bin/busybox", "/x/busybox"]


def test_store_images_are_data_images_run_in_their_root(tmp_path: Path) -> None:
    """An image registered in the store runs its container's command (and args) inside
    the image's root directory."""
    store = _store(tmp_path)
    launch = images.resolve(GUEST, ["/bb/busybox", "sh"], ["-c", "true"], python=PY, store=store)
    assert launch.argv == ["/bb/busybox", "sh", "-c", "true"]
    assert launch.rootfs == store.rootfs(GUEST)


def test_a_data_image_needs_a_command(tmp_path: Path) -> None:
    """A data image has no entry point: a container without a command cannot start."""
    with pytest.raises(ConfigError, match="needs a command"):
        images.resolve(GUEST, [], [], python=PY, store=_store(tmp_path))


def test_unknown_images_are_not_found(tmp_path: Path) -> None:
    """Neither an entry point nor in the store: ImageNotFound (ErrImagePull), naming both."""
    with pytest.raises(images.ImageNotFound, match=r"nginx.*local image store"):
        images.resolve("docker.io/nginx:1", ["x"], [], python=PY, store=_store(tmp_path))


def test_root_view_prologue_mounts_the_image_read_only_around_the_volumes(tmp_path: Path) -> None:
    """The container joins its cgroup first; the image is overlaid at the view's root,
    volumes are bound inside it, the root goes read-only after the binds (the volumes keep
    their own flags), and the program runs under unshare --root."""
    view = RootView(image=tmp_path / "img", base=tmp_path / "c")
    script = prologue(
        [
            Mount(source=tmp_path / "bin", target="/var/run/bin", read_only=True),
            Mount(source=tmp_path / "out", target="/var/run/out"),
        ],
        "/",
        cgroup_procs=tmp_path / "cg" / "cgroup.procs",
        view=view,
    )
    lines = script.splitlines()
    root = str(view.root)
    assert lines[1] == f"echo $$ > {tmp_path}/cg/cgroup.procs"
    assert lines[2].startswith("mount -t overlay overlay -o ")
    assert f"lowerdir={tmp_path}/img," in lines[2] and lines[2].endswith(root)
    binds = [i for i, line in enumerate(lines) if line.startswith("mount --bind")]
    assert lines[binds[-1]] == f"mount --bind {tmp_path}/out {root}/var/run/out"
    read_only_root = lines.index(f"mount -o remount,bind,ro {root}")
    assert read_only_root > max(binds)
    assert f"mount -o remount,bind,ro {root}/var/run/bin" in lines
    assert lines[-1] == f'exec unshare --root={root} --wd=/ -- "$@"'


def test_root_view_starts_fresh_each_time(tmp_path: Path) -> None:
    """A restarted container's view has empty upper and work dirs again."""
    view = RootView(image=tmp_path / "img", base=tmp_path / "c")
    view.prepare()
    (tmp_path / "c" / "upper" / "junk").write_text("x")
    view.prepare()
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["root", "upper", "work"]
    assert not any((tmp_path / "c" / "upper").iterdir())
