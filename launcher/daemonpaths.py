"""Where a launcher's private libvirt daemon keeps its files, by how it is isolated.

``Isolation`` names the three ways the daemon gets libvirt's fixed paths to itself (a mount
namespace of bind mounts, the container's own system dirs, or a session daemon's per-user
dirs; launcher/libvirtd.py's module doc says when each is chosen); ``DaemonPaths`` maps
every file the launcher, the handler and libvirt agree on to its place under the
launcher's private dir.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from shared import podlayout

# (private subdir, system path) pairs bind-mounted in the daemon's namespace.
BINDS: tuple[tuple[str, str], ...] = (
    ("run", "/run/libvirt"),
    ("lib", "/var/lib/libvirt"),
    ("cache", "/var/cache/libvirt"),
    ("log", "/var/log/libvirt"),
    ("etc", "/etc/libvirt"),
    ("swtpm-log", "/var/log/swtpm"),  # a TPM's swtpm log (libvirt's fixed path)
)
SYSTEM_DIRS = dict(BINDS)
# Session mode: libvirt's per-user dirs (XDG_RUNTIME_DIR/libvirt, …) under the root.
XDG_DIRS = {
    "XDG_RUNTIME_DIR": "xdg/runtime",
    "XDG_CACHE_HOME": "xdg/cache",
    "XDG_CONFIG_HOME": "xdg/config",
    "XDG_DATA_HOME": "xdg/data",
}
SESSION_DIRS = {
    "run": "xdg/runtime/libvirt",
    "cache": "xdg/cache/libvirt",
    "etc": "xdg/config/libvirt",
    "lib": "xdg/data/libvirt",
    "log": "log",
    "swtpm-log": "log/swtpm",  # unused: a session daemon logs swtpm under its cache dir
}
CAP_SYS_ADMIN = 21
# sun_path is 108 bytes; QEMU binds the guest's console and agent sockets.
MAX_SOCKET_PATH = 107


class Isolation(StrEnum):
    """How the daemon gets libvirt's fixed system paths to itself (see the module doc)."""

    MOUNT_NAMESPACE = "mount-namespace"
    CONTAINER = "container"
    SESSION = "session"


def has_cap_sys_admin(proc_status: str) -> bool:
    """CapEff of a /proc/<pid>/status text has CAP_SYS_ADMIN (bit 21)."""
    for line in proc_status.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    return False


def _own_status() -> str:
    return Path("/proc/self/status").read_text()


def choose_isolation(
    read_status: Callable[[], str] = _own_status, *, euid: int | None = None
) -> Isolation:
    """Session mode when not root; a mount namespace of our own when we may make one;
    else the container's."""
    if (os.geteuid() if euid is None else euid) != 0:
        return Isolation.SESSION
    if has_cap_sys_admin(read_status()):
        return Isolation.MOUNT_NAMESPACE
    return Isolation.CONTAINER


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonPaths:
    """The daemon's files. ``root`` (under the launcher's private dir) always holds its
    socket, config, log and the guest's sockets and serial log; libvirt's system dirs
    (``system``) are bind mounts of root's subdirs, or the container's own."""

    root: Path
    isolation: Isolation = Isolation.MOUNT_NAMESPACE
    system_root: Path = Path("/")  # where the container's system dirs are (tests move it)

    def system(self, sub: str) -> Path:
        """libvirt's system dir `sub` (run, lib, cache, log, etc) as this launcher sees it
        (in session mode: the per-user dir libvirt uses instead)."""
        if self.isolation is Isolation.SESSION:
            return self.root / SESSION_DIRS[sub]
        if self.isolation is Isolation.MOUNT_NAMESPACE:
            return self.root / sub
        return self.system_root / SYSTEM_DIRS[sub].lstrip("/")

    def environment(self) -> dict[str, str]:
        """The daemon's environment: ours, and in session mode HOME and the XDG dirs under
        the root."""
        env = dict(os.environ)
        if self.isolation is Isolation.SESSION:
            env["HOME"] = str(self.root / "home")
            env.update({var: str(self.root / sub) for var, sub in XDG_DIRS.items()})
        return env

    @property
    def guest_dir(self) -> Path:
        """The guest's console/agent sockets (the handler reads them here)."""
        return self.root / "run" / "kvpy"

    @property
    def guest_dir_for_qemu(self) -> Path:
        """The same dir as QEMU sees it: short inside the namespace, where /run/libvirt
        is root/run; the private path itself in a container or session."""
        if self.isolation is Isolation.MOUNT_NAMESPACE:
            return Path(SYSTEM_DIRS["run"]) / "kvpy"
        return self.guest_dir

    @property
    def swtpm_storage(self) -> Path:
        """libvirt's swtpm state dir (a `<uuid>/tpm2` per domain): the system daemon's
        /var/lib/libvirt/swtpm, a session daemon's under its XDG config dir."""
        if self.session:
            return self.root / XDG_DIRS["XDG_CONFIG_HOME"] / "libvirt" / "qemu" / "swtpm"
        return self.system("lib") / "swtpm"

    @property
    def serial_log(self) -> Path:
        return self.root / "log" / "kvpy" / "serial.log"

    @property
    def socket(self) -> Path:
        return self.root / podlayout.LIBVIRT_SOCKET

    @property
    def session(self) -> bool:
        return self.isolation is Isolation.SESSION

    @property
    def uri(self) -> str:
        return f"qemu+unix:///{driver_path(session=self.session)}?socket={self.socket}"

    @property
    def pidfile(self) -> Path:
        return self.root / "libvirtd.pid"

    @property
    def config(self) -> Path:
        return self.root / "etc" / "libvirtd.conf"

    @property
    def log(self) -> Path:
        return self.root / "libvirtd.log"

    @property
    def qemu_conf(self) -> Path:
        return self.system("etc") / "qemu.conf"

    @property
    def qemu_pids(self) -> Path:
        if self.session:
            return self.system("run") / "qemu" / "run"
        return self.system("run") / "qemu"

    @property
    def capabilities(self) -> Path:
        if self.session:
            return self.system("cache") / "qemu" / "cache" / "capabilities"
        return self.system("cache") / "qemu" / "capabilities"


def driver_path(*, session: bool) -> str:
    """The QEMU driver URI's path: a session daemon refuses qemu:///system and back."""
    return "session" if session else "system"
