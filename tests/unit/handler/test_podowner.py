"""virt-handler hands a non-root launcher what it opens: the container's device nodes,
hostDisk images (or their directory), hotplugged disk files; sockets it dials get its group.
Run against a directory standing for `/proc/<pid>/root` (device nodes made with mknod)."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from handler.hotplug.pvc import hand_over as _hand_over
from handler.netns import Launcher
from handler.podowner import hand_over, host_disk_files, resolve_in_root
from shared.launcherpod import LAUNCHER_GID, LAUNCHER_UID
from shared.wire.unixpath import bind_private
from tests.unit.controller.builders import make_vmi

LAUNCHER = Launcher(pid=4242, uid=LAUNCHER_UID)


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "4242" / "root"
    (root / "dev" / "net").mkdir(parents=True)
    os.mknod(root / "dev" / "net" / "tun", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    os.mknod(root / "dev" / "kvm", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    (root / "dev" / "vmi-disks").mkdir()
    os.mknod(root / "dev" / "vmi-disks" / "blk", 0o660 | stat.S_IFBLK, os.makedev(7, 0))
    return root


def test_device_nodes_are_given_to_the_launchers_user(tmp_path: Path) -> None:
    """tun, kvm and block-mode claims' nodes in the container become the launcher's; a
    device the container was not given (vhost-net) is skipped."""
    root = _root(tmp_path)
    changed = hand_over(LAUNCHER, proc=str(tmp_path))
    assert changed == ["/dev/kvm", "/dev/net/tun", "/dev/vmi-disks/blk"]
    for rel in ("dev/kvm", "dev/net/tun", "dev/vmi-disks/blk"):
        assert (root / rel).stat().st_uid == LAUNCHER_UID


def test_a_root_launcher_needs_nothing(tmp_path: Path) -> None:
    """uid 0 (the root switch, process-mode nodes): nothing is changed."""
    root = _root(tmp_path)
    assert hand_over(Launcher(pid=4242, uid=0), proc=str(tmp_path)) == []
    assert (root / "dev/net/tun").stat().st_uid == 0


def test_symlinks_in_the_pod_never_lead_the_chown_out(tmp_path: Path) -> None:
    """A pod replacing /dev/net with a symlink to a node directory, or a device with a
    symlink to a node file, gets nothing changed outside its root."""
    root = _root(tmp_path)
    outside = tmp_path / "node-file"
    outside.write_text("x")
    (root / "dev" / "kvm").unlink()
    (root / "dev" / "kvm").symlink_to(outside)
    net = root / "dev" / "net"
    (net / "tun").unlink()
    net.rmdir()
    (tmp_path / "node-dir").mkdir()
    os.mknod(tmp_path / "node-dir" / "tun", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    net.symlink_to(tmp_path / "node-dir")
    assert hand_over(LAUNCHER, proc=str(tmp_path)) == ["/dev/vmi-disks/blk"]
    assert outside.stat().st_uid == 0 and (tmp_path / "node-dir/tun").stat().st_uid == 0


def test_host_disks_give_the_image_or_its_directory(tmp_path: Path) -> None:
    """An existing hostDisk image becomes the launcher's; for a missing one (DiskOrCreate)
    its directory does, so the launcher can make it."""
    vmi = make_vmi(raw={"spec": {"volumes": [
        {"name": "have", "hostDisk": {"path": "/var/data/a.img", "type": "Disk"}},
        {"name": "make", "hostDisk": {"path": "/var/new/b.img", "type": "DiskOrCreate",
                                      "capacity": "1Gi"}},
    ]}})  # fmt: skip
    files = host_disk_files(vmi)
    assert files == [
        PurePosixPath("var/run/kubevirt-private/vmi-disks/have/a.img"),
        PurePosixPath("var/run/kubevirt-private/vmi-disks/make/b.img"),
    ]
    root = _root(tmp_path)
    for f in files:
        (root / f).parent.mkdir(parents=True)
    (root / files[0]).write_text("disk")
    changed = hand_over(LAUNCHER, host_disks=files, proc=str(tmp_path))
    assert changed[-2:] == [f"/{files[0]}", f"/{files[1].parent}"]
    assert (root / files[0]).stat().st_uid == LAUNCHER_UID
    assert (root / files[1].parent).stat().st_uid == LAUNCHER_UID


def test_host_disks_are_found_through_the_images_var_run_symlink(tmp_path: Path) -> None:
    """In the launcher image /var/run is a symlink to /run: the hostDisk's directory is
    found through it inside the container's root, and an image is handed over."""
    vmi = make_vmi(raw={"spec": {"volumes": [
        {"name": "make", "hostDisk": {"path": "/var/new/b.img", "type": "DiskOrCreate",
                                      "capacity": "1Gi"}},
        {"name": "have", "hostDisk": {"path": "/var/data/a.img", "type": "Disk"}},
    ]}})  # fmt: skip
    root = _root(tmp_path)
    disks = root / "run" / "kubevirt-private" / "vmi-disks"
    (disks / "make").mkdir(parents=True)
    (disks / "have").mkdir()
    (disks / "have" / "a.img").write_text("disk")
    (root / "var").mkdir()
    (root / "var" / "run").symlink_to("/run")
    changed = hand_over(LAUNCHER, host_disks=host_disk_files(vmi), proc=str(tmp_path))
    assert changed[-2:] == [
        "/run/kubevirt-private/vmi-disks/make",
        "/run/kubevirt-private/vmi-disks/have/a.img",
    ]
    assert (disks / "make").stat().st_uid == LAUNCHER_UID
    assert (disks / "have" / "a.img").stat().st_uid == LAUNCHER_UID


def test_host_disk_symlinks_resolve_inside_the_containers_root(tmp_path: Path) -> None:
    """A relative symlink climbing out, or an absolute one naming a node path, is resolved
    inside the container's root: the node's directory of that name is never changed."""
    root = _root(tmp_path)
    node_dir = tmp_path / "node" / "kubevirt-private" / "vmi-disks" / "make"
    node_dir.mkdir(parents=True)
    (root / "var").mkdir()
    (root / "var" / "run").symlink_to("../../../../../../../../node")
    files = [PurePosixPath("var/run/kubevirt-private/vmi-disks/make/b.img")]
    assert resolve_in_root(str(root), files[0].parent) == PurePosixPath(
        "node/kubevirt-private/vmi-disks/make"
    )
    assert hand_over(LAUNCHER, host_disks=files, proc=str(tmp_path)) == ["/dev/kvm",
        "/dev/net/tun", "/dev/vmi-disks/blk"]  # fmt: skip
    assert node_dir.stat().st_uid == 0
    (root / "var" / "run").unlink()
    (root / "var" / "run").symlink_to(tmp_path / "node")
    assert hand_over(LAUNCHER, host_disks=files, proc=str(tmp_path))[3:] == []
    assert node_dir.stat().st_uid == 0


def test_a_symlink_loop_hands_nothing_over(tmp_path: Path) -> None:
    """A hostDisk directory behind a symlink loop is refused (logged), the rest still
    handed over."""
    root = _root(tmp_path)
    (root / "var").mkdir()
    (root / "var" / "run").symlink_to("/var/run")
    files = [PurePosixPath("var/run/kubevirt-private/vmi-disks/make/b.img")]
    assert hand_over(LAUNCHER, host_disks=files, proc=str(tmp_path)) == ["/dev/kvm",
        "/dev/net/tun", "/dev/vmi-disks/blk"]  # fmt: skip


def test_a_hotplugged_disk_file_becomes_the_launchers(tmp_path: Path) -> None:
    """The claim's disk.img is owned by 107:107 and read-writable by them."""
    disk = tmp_path / "disk.img"
    disk.write_bytes(b"\0" * 512)
    disk.chmod(0o600)
    _hand_over(disk)
    st = disk.stat()
    assert (st.st_uid, st.st_gid) == (LAUNCHER_UID, LAUNCHER_GID)
    assert stat.S_IMODE(st.st_mode) == 0o660


def test_group_sockets_let_the_launchers_group_in(tmp_path: Path) -> None:
    """A socket bound for the launchers' group is 0660 in a 0710 directory of that group;
    without a group it stays 0600 in 0700."""
    group = bind_private(tmp_path / "g" / "s.sock", group=LAUNCHER_GID)
    private = bind_private(tmp_path / "p" / "s.sock")
    try:
        g, p = tmp_path / "g", tmp_path / "p"
        assert stat.S_IMODE((g / "s.sock").stat().st_mode) == 0o660
        assert stat.S_IMODE(g.stat().st_mode) == 0o710 and g.stat().st_gid == LAUNCHER_GID
        assert stat.S_IMODE((p / "s.sock").stat().st_mode) == 0o600
        assert stat.S_IMODE(p.stat().st_mode) == 0o700
    finally:
        group.close()
        private.close()


def test_a_directory_of_another_user_is_left_as_it_is(tmp_path: Path) -> None:
    """A non-root launcher binds in a pod volume the kubelet made (root's, 0777): it cannot
    chmod it, so it leaves it; its socket is still 0600. Seen here from the other side:
    root binding in a directory 107 owns."""
    shared = tmp_path / "sockets"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    os.chown(shared, LAUNCHER_UID, LAUNCHER_GID)
    sock = bind_private(shared / "launcher-sock")
    try:
        assert stat.S_IMODE(shared.stat().st_mode) == 0o777
        assert stat.S_IMODE((shared / "launcher-sock").stat().st_mode) == 0o600
    finally:
        sock.close()
