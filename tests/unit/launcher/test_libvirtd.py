"""How the launcher gives its libvirtd the system paths: its own mount namespace when it
has CAP_SYS_ADMIN (process-mode nodes), the container's filesystem otherwise (real
nodes); and no libvirt cgroups when the launcher could not make its partition."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from launcher.daemonpaths import DaemonPaths, Isolation, choose_isolation, has_cap_sys_admin
from launcher.libvirtd import NO_CGROUPS, LibvirtDaemon, _running
from launcher.migration_endpoint import Endpoint
from launcher.seed import replace_files
from shared import podlayout

STATUS = "Name:\tpython3\nCapInh:\t0000000000000000\nCapPrm:\t{eff}\nCapEff:\t{eff}\n"
ALL_CAPS = "000001ffffffffff"
# A container runtime's default set (CAP_CHOWN … CAP_SETFCAP, without CAP_SYS_ADMIN).
RUNTIME_DEFAULT = "00000000a80425fb"


@pytest.mark.parametrize(
    ("eff", "isolation"),
    [
        pytest.param(ALL_CAPS, Isolation.MOUNT_NAMESPACE, id="root-on-the-host"),
        pytest.param(f"{1 << 21:016x}", Isolation.MOUNT_NAMESPACE, id="only-sys-admin"),
        pytest.param(RUNTIME_DEFAULT, Isolation.CONTAINER, id="runtime-default-set"),
        pytest.param(f"{(1 << 41) - 1 - (1 << 21):016x}", Isolation.CONTAINER, id="all-but"),
    ],
)
def test_isolation_follows_cap_sys_admin(eff: str, isolation: Isolation) -> None:
    """CapEff bit 21 decides: with it a mount namespace of our own, without it the
    container's (unshare --mount would be refused)."""
    assert choose_isolation(lambda: STATUS.format(eff=eff), euid=0) is isolation


def test_no_cap_eff_line_means_no_capability() -> None:
    """A status text without CapEff is read as no capabilities."""
    assert not has_cap_sys_admin("Name:\tx\n")


def _daemon(root: Path, isolation: Isolation) -> LibvirtDaemon:
    paths = DaemonPaths(root=root / "private", isolation=isolation, system_root=root / "sys")
    return LibvirtDaemon(paths=paths, libvirtd=Path("/usr/sbin/libvirtd"), tini=Path("/tini"))


def test_mount_namespace_keeps_everything_under_the_private_dir(tmp_path: Path) -> None:
    """Process-mode nodes: qemu.conf and libvirt's dirs live under the private dir (bind
    mounted over the system paths inside unshare), QEMU's sockets go to /run/libvirt/kvpy."""
    daemon = _daemon(tmp_path, Isolation.MOUNT_NAMESPACE)
    daemon.prepare(capabilities_seed=None)
    private = tmp_path / "private"
    assert (private / "etc" / "qemu.conf").is_file()
    assert NO_CGROUPS not in (private / "etc" / "qemu.conf").read_text()
    assert daemon.paths.qemu_pids == private / "run" / "qemu"
    assert daemon.paths.guest_dir_for_qemu == Path("/run/libvirt/kvpy")
    argv = daemon._argv()
    assert argv[:5] == ["unshare", "--mount", "--propagation", "private", "--"]
    assert not (tmp_path / "sys").exists()


def test_container_uses_its_own_system_dirs_without_unshare(tmp_path: Path) -> None:
    """Without CAP_SYS_ADMIN: no unshare, no bind mounts; qemu.conf where libvirtd reads
    it (/etc/libvirt), pid files and capabilities in the system dirs; the guest's sockets
    and serial log stay under the private dir, where the handler looks."""
    daemon = _daemon(tmp_path, Isolation.CONTAINER)
    daemon.prepare(capabilities_seed=None)
    system = tmp_path / "sys"
    assert (system / "etc" / "libvirt" / "qemu.conf").is_file()
    assert daemon.paths.qemu_pids == system / "run" / "libvirt" / "qemu"
    assert daemon.paths.capabilities == system / "var/cache/libvirt/qemu/capabilities"
    assert daemon.paths.guest_dir_for_qemu == tmp_path / "private" / "run" / "kvpy"
    assert daemon.paths.guest_dir.is_dir() and daemon.paths.serial_log.parent.is_dir()
    conf = str(daemon.paths.config)
    assert daemon._argv() == [
        "/tini", "-s", "--", "/usr/sbin/libvirtd", "-f", conf, "-p", str(daemon.paths.pidfile),
    ]  # fmt: skip


@pytest.mark.parametrize("isolation", list(Isolation))
def test_no_partition_means_no_libvirt_cgroups(tmp_path: Path, isolation: Isolation) -> None:
    """When the cgroup partition could not be made (read-only cgroupfs), qemu.conf tells
    libvirt to use no cgroup controllers, so QEMU stays in the launcher's cgroup."""
    daemon = _daemon(tmp_path, isolation)
    daemon.prepare(capabilities_seed=None, cgroups=False)
    assert "cgroup_controllers = [ ]" in daemon.paths.qemu_conf.read_text()


@pytest.mark.parametrize("isolation", list(Isolation))
def test_guest_console_and_serial_log_where_the_pod_layout_says(
    tmp_path: Path, isolation: Isolation
) -> None:
    """The handler finds the console socket and serial log at the pod layout's paths
    inside the private volume, in either isolation mode."""
    paths = DaemonPaths(root=tmp_path / podlayout.LIBVIRT_ROOT, isolation=isolation)
    assert paths.guest_dir / "console.sock" == tmp_path / podlayout.CONSOLE_SOCKET
    assert paths.serial_log == tmp_path / podlayout.SERIAL_LOG


def test_a_seeded_cache_is_reused_until_libvirt_rewrites_a_file(tmp_path: Path) -> None:
    """The seed's files are copied in with their times; `capabilities_reused` holds while
    they are as copied, and not once libvirt rewrote one (it probed QEMU again) or when
    nothing was seeded."""
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "x86_64.xml").write_text("<qemuCaps/>")
    daemon = _daemon(tmp_path, Isolation.CONTAINER)
    daemon.prepare(capabilities_seed=seed)
    copied = daemon.paths.capabilities / "x86_64.xml"
    assert copied.read_text() == "<qemuCaps/>"
    assert daemon.capabilities_reused()
    copied.write_text("<qemuCaps>probed again</qemuCaps>")
    os.utime(copied, ns=(1, 1))
    assert not daemon.capabilities_reused()
    unseeded = _daemon(tmp_path / "other", Isolation.CONTAINER)
    unseeded.prepare(capabilities_seed=None)
    assert not unseeded.capabilities_reused()


def test_the_seed_is_replaced_file_by_file_and_stale_files_go(tmp_path: Path) -> None:
    """launcher.seed writes each cache file by an atomic rename and removes files the new
    cache lacks (another emulator, a crashed run's temporary file)."""
    source, out = tmp_path / "cache", tmp_path / "out"
    source.mkdir()
    out.mkdir()
    (source / "a.xml").write_text("new")
    (out / "a.xml").write_text("old")
    (out / "gone.xml").write_text("stale")
    (out / ".a.xml.123").write_text("half")
    assert replace_files(source, out) == 1
    assert sorted(p.name for p in out.iterdir()) == ["a.xml"]
    assert (out / "a.xml").read_text() == "new"
    assert replace_files(tmp_path / "missing", out) == 0 and not list(out.iterdir())


def test_a_non_root_launcher_runs_a_session_daemon() -> None:
    """Any uid but 0 means session mode, whatever the capabilities say: a session daemon
    needs none, and a system one cannot run without root."""
    assert choose_isolation(lambda: STATUS.format(eff=ALL_CAPS), euid=107) is Isolation.SESSION


def test_session_keeps_every_libvirt_dir_under_the_private_dir(tmp_path: Path) -> None:
    """Session mode: HOME and the XDG dirs point under the private dir, where qemu.conf,
        QEMU's pid files and the capability cache are (libvirt's per-user layout); the URI
        names the session driver on the private socket; no unshare, no setpriv as that user;
    qemu.conf names no user (libvirt would chown its state dirs to it)."""
    daemon = _daemon(tmp_path, Isolation.SESSION)
    daemon.prepare(capabilities_seed=None, cgroups=False)
    private = tmp_path / "private"
    env = daemon.paths.environment()
    assert env["HOME"] == str(private / "home")
    assert env["XDG_CONFIG_HOME"] == str(private / "xdg/config")
    conf = (private / "xdg/config/libvirt/qemu.conf").read_text()
    assert "user =" not in conf and "group =" not in conf and "cgroup_controllers" in conf
    assert daemon.paths.qemu_pids == private / "xdg/runtime/libvirt/qemu/run"
    assert daemon.paths.capabilities == private / "xdg/cache/libvirt/qemu/cache/capabilities"
    assert daemon.paths.guest_dir_for_qemu == private / "run" / "kvpy"
    assert daemon.paths.uri == f"qemu+unix:///session?socket={daemon.paths.socket}"
    assert daemon._argv()[:3] == ["/tini", "-s", "--"]
    assert not (tmp_path / "sys").exists()


def test_a_session_daemon_started_from_root_runs_as_its_user(tmp_path: Path) -> None:
    """`run_as` (the node's capability seed): the daemon's tree is handed to that user and
    setpriv starts it as that uid and gid with no other groups."""
    paths = DaemonPaths(root=tmp_path / "private", isolation=Isolation.SESSION)
    daemon = LibvirtDaemon(
        paths=paths, libvirtd=Path("/usr/sbin/libvirtd"), tini=Path("/tini"), run_as=107
    )
    daemon.prepare(capabilities_seed=None, cgroups=False)
    assert daemon._argv()[:6] == ["setpriv", "--reuid", "107", "--regid", "107", "--clear-groups"]
    if os.geteuid() == 0:
        owners = {(p.stat().st_uid, p.stat().st_gid) for p in paths.root.rglob("*")}
        assert owners == {(107, 107)}


def test_system_daemons_keep_the_system_uri(tmp_path: Path) -> None:
    """Root launchers (either isolation) talk to qemu:///system, as before."""
    for isolation in (Isolation.CONTAINER, Isolation.MOUNT_NAMESPACE):
        paths = DaemonPaths(root=tmp_path, isolation=isolation)
        assert paths.uri.startswith("qemu+unix:///system?socket=")
        assert paths.environment() == dict(os.environ)


def test_migration_endpoints_name_the_daemons_driver(tmp_path: Path) -> None:
    """A non-root launcher migrates to qemu:///session (a session daemon refuses
    qemu:///system), a root one to qemu:///system, on the endpoint's socket."""
    session = Endpoint(address=tmp_path, session=True).libvirt_uri
    assert session == f"qemu+unix:///session?socket={tmp_path}/sock/libvirt-sock"
    assert Endpoint(address=tmp_path).libvirt_uri.startswith("qemu+unix:///system?")


def test_derived_cache_entries_count_as_seeded(tmp_path: Path) -> None:
    """`derive` adds to the copied seed (the TCG wrapper's entry) before the seed's times
    are taken, so the cache still counts as reused while libvirt leaves it alone."""
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "x86_64.xml").write_text("<qemuCaps/>")
    daemon = _daemon(tmp_path, Isolation.CONTAINER)
    daemon.prepare(
        capabilities_seed=seed, derive=lambda cache: (cache / "wrapper.xml").write_text("<w/>")
    )
    assert (daemon.paths.capabilities / "wrapper.xml").read_text() == "<w/>"
    assert daemon.capabilities_reused()


def test_a_process_counts_as_running_while_any_thread_lives() -> None:
    """A killed QEMU is waited for until its last thread is gone, not only its leader (a
    zombie leader's threads still sit in its cgroups, so the partition could not go)."""
    done = threading.Event()
    worker = threading.Thread(target=done.wait)
    worker.start()
    try:
        assert _running(os.getpid())
    finally:
        done.set()
        worker.join()
    assert not _running(2**22 + 1)  # above pid_max's ceiling: no such process
