"""The launcher's private libvirt daemon, as KubeVirt's launcher pod runs its own.

libvirtd in system mode uses fixed paths (/run/libvirt, /var/lib/libvirt, …), which must
be the daemon's own. Two ways to get there (``Isolation``):

- MOUNT_NAMESPACE, when the launcher has CAP_SYS_ADMIN (process-mode nodes, where pods
  share the host's filesystem): a mount namespace where those paths are bind mounts of
  directories under the launcher's private dir. Paths reach the namespace's shell as
  positional arguments, never as code.
- CONTAINER, without CAP_SYS_ADMIN (a real container: ``unshare --mount`` is refused,
  and the container already has a filesystem of its own): libvirtd uses the system paths
  as they are; its qemu.conf is written where it reads it (/etc/libvirt).
- SESSION, when the launcher is not root (a launcher pod's compute container runs as
  ``shared.launcherpod.LAUNCHER_UID``, KubeVirt's qemu user 107): libvirtd in session
  mode, every path of it under the private dir through ``HOME`` and the XDG variables;
  QEMU runs as the same user and opens only what was made for it (virt-handler's tap and
  device ownership, the kubelet's fsGroup on volumes). No cgroups in session mode.
  ``run_as`` starts such a daemon from root (the node's capability seed, made as the
  launchers that read it run).

Either way the daemon gets its config through ``-f``, a distinct host UUID, its socket and
the guest's console/agent sockets and serial log under the private dir (where the handler
finds them), and tini as a subreaper so QEMU exits are reaped at once (libvirt waits for
QEMU to vanish). Without a cgroup partition (read-only cgroupfs in a container) libvirt is
told to use no cgroups at all, so QEMU stays in the container's cgroup and dies with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

import structlog

from launcher.daemonpaths import (
    BINDS,
    MAX_SOCKET_PATH,
    DaemonPaths,
    Isolation,
)
from launcher.errors import StartupError
from shared import podlayout

log = structlog.get_logger("launcher.libvirtd")

_NAMESPACE_SCRIPT = """
set -e
daemon="$1"; tini="$2"; conf="$3"; pidfile="$4"; shift 4
while [ "$#" -gt 0 ]; do mkdir -p "$2"; mount --bind "$1" "$2"; shift 2; done
exec "$tini" -s -- "$daemon" -f "$conf" -p "$pidfile"
"""

QEMU_CONF = """\
user = "root"
group = "root"
swtpm_user = "root"
swtpm_group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
stdio_handler = "file"
namespaces = [ ]
"""
NO_CGROUPS = "cgroup_controllers = [ ]\n"


def qemu_conf(*, session: bool, cgroups: bool, hugetlbfs: Path | None = None) -> str:
    """The daemon's qemu.conf. A session daemon runs QEMU (and swtpm) as itself: naming
    root there makes libvirt chown its state dirs to root, which the user may not.
    ``hugetlbfs``: the pod's hugepages mount (memory.hugepages), where guest memory goes."""
    text = QEMU_CONF + (f'hugetlbfs_mount = "{hugetlbfs}"\n' if hugetlbfs else "")
    if session:
        text = "".join(line + "\n" for line in text.splitlines() if not _names_user(line))
    return text + ("" if cgroups else NO_CGROUPS)


def _names_user(line: str) -> bool:
    return line.startswith(("user =", "group =", "swtpm_user =", "swtpm_group ="))


class LibvirtDaemon:
    """Starts, watches and stops one private libvirtd."""

    def __init__(
        self,
        *,
        paths: DaemonPaths,
        libvirtd: Path,
        tini: Path,
        emulator: Path = Path("/usr/bin/qemu-system-x86_64"),
        run_as: int | None = None,
    ) -> None:
        self.paths = paths
        self._run_as = run_as  # uid (and gid) to start a session daemon as, from root
        self._libvirtd = libvirtd
        self._tini = tini
        self._emulator = emulator
        self._process: asyncio.subprocess.Process | None = None
        self._seeded: dict[str, int] = {}  # seeded cache file → its mtime (ns)

    def prepare(
        self,
        *,
        capabilities_seed: Path | None,
        cgroups: bool = True,
        derive: Callable[[Path], object] | None = None,
    ) -> None:
        """Lay out fresh private dirs and config; seed the capability cache if given
        (``derive`` then adds to the cache dir: the TCG wrapper's entry, launcher/tcgthreads).

        Whatever an earlier daemon left here (domain definitions, pid files) is stale: a
        launcher owns exactly one VM for exactly one run. ``cgroups`` False: libvirt
        places QEMU in no cgroup of its own (it stays in the launcher's).
        """
        paths = self.paths
        shutil.rmtree(paths.root, ignore_errors=True)
        for sub, _ in BINDS:
            (paths.root / sub).mkdir(parents=True, exist_ok=True)
            paths.system(sub).mkdir(parents=True, exist_ok=True)
        for directory in (paths.socket.parent, paths.guest_dir, paths.serial_log.parent):
            directory.mkdir(parents=True, exist_ok=True)
        if paths.session:
            (paths.root / "home").mkdir(exist_ok=True)
        socket = paths.guest_dir_for_qemu / podlayout.CONSOLE_SOCKET_NAME
        if len(str(socket)) > MAX_SOCKET_PATH:
            raise StartupError(f"{socket}: too long for a Unix socket; use a shorter private dir")
        paths.config.write_text(
            f'unix_sock_dir = "{paths.socket.parent}"\n'
            'unix_sock_rw_perms = "0770"\n'
            f'host_uuid = "{uuid.uuid4()}"\n'
            'log_outputs = "3:stderr"\n'
        )
        hugetlbfs = Path(podlayout.HUGEPAGES_DIR)
        paths.qemu_conf.write_text(
            qemu_conf(
                session=paths.session,
                cgroups=cgroups,
                hugetlbfs=hugetlbfs if os.path.ismount(hugetlbfs) else None,
            )
        )
        if self._run_as is not None:
            _chown_tree(paths.root, self._run_as)
        log.info("libvirtd_prepared", isolation=str(paths.isolation), cgroups=cgroups)
        self._seeded = {}
        if capabilities_seed and capabilities_seed.is_dir():
            try:
                shutil.copytree(capabilities_seed, self.paths.capabilities, dirs_exist_ok=True)
            except (OSError, shutil.Error) as e:  # a seed only makes the start faster
                log.warning("qemu_capabilities_seed_unreadable", error=str(e))
            if derive is not None:
                derive(self.paths.capabilities)
            self._seeded = _mtimes(self.paths.capabilities)

    def capabilities_reused(self) -> bool:
        """The seeded QEMU capabilities served libvirtd as they were: it rewrites a cache
        file when it judges it stale and probes QEMU again."""
        return bool(self._seeded) and _mtimes(self.paths.capabilities) == self._seeded

    async def start(self, *, timeout: float = 15.0) -> None:
        """Start the daemon and wait for its socket; StartupError says why it could not."""
        await self.spawn()
        await self.ready(timeout=timeout)

    async def spawn(self) -> None:
        """Start the daemon's process without waiting for it (`ready` waits): the caller
        can do its own start-up work while the daemon starts."""
        for tool in (self._libvirtd, self._tini, self._emulator):
            if not tool.exists():
                raise StartupError(
                    f"{tool} not found: install libvirt-daemon-system, qemu-system-x86 and tini"
                )
        with self.paths.log.open("ab") as logfile:
            self._process = await asyncio.create_subprocess_exec(
                *self._argv(),
                stdin=asyncio.subprocess.DEVNULL, stdout=logfile, stderr=logfile,
                start_new_session=True, env=self.paths.environment(),
            )  # fmt: skip
        log.info("libvirtd_spawned", pid=self._process.pid)

    async def ready(self, *, timeout: float = 15.0) -> None:
        """Until the spawned daemon accepts connections on its socket."""
        process = self._process
        assert process is not None, "spawn() first"
        try:
            async with asyncio.timeout(timeout):
                while not await self._accepting():
                    if process.returncode is not None:
                        raise StartupError(self._failure("exited"))
                    await asyncio.sleep(0.02)
        except TimeoutError:
            raise StartupError(self._failure(f"no socket after {timeout:g}s")) from None
        log.info("libvirtd_started", pid=process.pid, socket=str(self.paths.socket))

    def _argv(self) -> list[str]:
        daemon = [str(self._libvirtd), "-f", str(self.paths.config), "-p", str(self.paths.pidfile)]
        if self.paths.isolation is Isolation.SESSION and self._run_as is not None:
            ids = str(self._run_as)
            user = ["setpriv", "--reuid", ids, "--regid", ids, "--clear-groups"]
            return [*user, str(self._tini), "-s", "--", *daemon]
        if self.paths.isolation is not Isolation.MOUNT_NAMESPACE:
            return [str(self._tini), "-s", "--", *daemon]
        binds = [str(part) for sub, target in BINDS for part in (self.paths.root / sub, target)]
        return [
            "unshare", "--mount", "--propagation", "private", "--",
            "sh", "-c", _NAMESPACE_SCRIPT, "libvirtd-ns",
            str(self._libvirtd), str(self._tini), str(self.paths.config),
            str(self.paths.pidfile), *binds,
        ]  # fmt: skip

    async def _accepting(self) -> bool:
        """The daemon listens on its socket. It binds (the file appears) before it listens:
        a client that connects in between is refused."""
        try:
            _, writer = await asyncio.open_unix_connection(self.paths.socket)
        except (FileNotFoundError, ConnectionRefusedError):
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True

    def _failure(self, what: str) -> str:
        tail = self.paths.log.read_text(errors="replace").strip().splitlines()[-3:]
        return f"libvirtd {what}: {' | '.join(tail) or 'no output'} (log {self.paths.log})"

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def wait(self) -> int:
        """Until the daemon exits; returns its exit code."""
        assert self._process is not None
        return await self._process.wait()

    def save_capabilities(self, seed: Path) -> None:
        """Copy the probed QEMU capabilities out so the next launcher starts warm."""
        if self.paths.capabilities.is_dir() and not seed.exists():
            tmp = seed.with_name(f"{seed.name}.{os.getpid()}")
            shutil.copytree(self.paths.capabilities, tmp)
            with contextlib.suppress(OSError):
                tmp.rename(seed)
            shutil.rmtree(tmp, ignore_errors=True)

    async def stop(self, *, timeout: float = 5.0) -> None:
        """SIGTERM the daemon (tini forwards it), SIGKILL its group after ``timeout``.

        Any QEMU still listed in the daemon's pid files is killed too, so nothing outlives us.
        """
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(timeout):
                    await process.wait()
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
        await self._kill_leftover_qemu(timeout=timeout)
        log.info("libvirtd_stopped")

    async def _kill_leftover_qemu(self, *, timeout: float) -> None:
        """SIGKILL any QEMU still listed, and wait (up to `timeout`) until it is gone: its
        cgroups can only be removed then."""
        killed = []
        for pidfile in self.paths.qemu_pids.glob("*.pid"):
            if pidfile.name == "driver.pid":  # libvirtd's own
                continue
            with contextlib.suppress(ValueError, OSError):
                pid = int(pidfile.read_text().strip())
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                log.warning("qemu_killed", pid=pid, pidfile=str(pidfile))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while killed:
                    await asyncio.sleep(0.02)
                    killed = [pid for pid in killed if _running(pid)]


def _running(pid: int) -> bool:
    """Any thread of the process still alive (an exited thread has left its cgroups). The
    leader turns zombie first while QEMU's other threads still exit, and still count."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
            return True
    return False


def _chown_tree(root: Path, uid: int) -> None:
    """root and everything under it owned by uid:uid (the session daemon's own)."""
    os.chown(root, uid, uid)
    for parent, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            os.chown(Path(parent) / name, uid, uid, follow_symlinks=False)


def _mtimes(directory: Path) -> dict[str, int]:
    if not directory.is_dir():
        return {}
    return {p.name: p.stat().st_mtime_ns for p in directory.iterdir() if p.is_file()}
