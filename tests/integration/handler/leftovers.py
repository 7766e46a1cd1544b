"""What a VMI's run may leave on the node once the VMI is gone, looked for precisely.

Everything is matched by names only one VMI's run carries, so other tests and helpers
busy on the same machine never count:
- the VMI uid: the launcher's `--uid`, QEMU's `-uuid`, the launcher's cgroup partition;
- the launcher pod's uid: `KVPY_POD=<uid>` in the environment of every process the node
  agent started for the pod (the launcher, its tini and libvirtd), its directory on the
  node, and the sources of the bind mounts in the pod's private mount namespaces;
- the namespace (unique per test): QEMU's `-name guest=<ns>_<name>`, libvirt file names.

Mounts are read from every mount namespace alive on the machine (one process per
namespace), not only the test's own: pods and their libvirtds run in private ones.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from localkube.nodeagent.config import POD_ENV_MARKER
from shared.cgrouppartition import partition_glob

CGROUP_ROOT = Path("/sys/fs/cgroup")
HOST_LIBVIRT_DIRS = (
    Path("/run/libvirt/qemu"),
    Path("/var/lib/libvirt/qemu"),
    Path("/var/log/libvirt/qemu"),
    Path("/etc/libvirt/qemu"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Footprint:
    """The names one VMI's run goes by on the node."""

    vmi: str  # namespace/name
    vmi_uid: str
    pod_uid: str
    pod_dir: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Proc:
    pid: int
    cmdline: tuple[str, ...]

    @property
    def kind(self) -> str:
        """qemu, libvirtd, tini, launcher or the program's name."""
        prog = os.path.basename(self.cmdline[0]) if self.cmdline else "?"
        if prog.startswith("qemu-system"):
            return "qemu"
        if prog in ("libvirtd", "virtqemud", "tini"):
            return prog
        if "launcher" in self.cmdline[1:3]:
            return "launcher"
        return prog

    def __str__(self) -> str:
        return f"{self.kind}[{self.pid}] {' '.join(self.cmdline)[:200]}"


def _pids(exclude: set[int]) -> Iterator[int]:
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != me and int(entry.name) not in exclude:
            yield int(entry.name)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:  # the process exited meanwhile
        return b""


def _alive(pid: int) -> bool:
    stat = _read(f"/proc/{pid}/stat")
    return bool(stat) and stat.rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")


def processes(
    *, cmdline: Iterable[str], env: Iterable[str] = (), exclude: Iterable[int] = ()
) -> list[Proc]:
    """Live processes whose command line contains one of `cmdline` or whose environment
    holds one of the `env` entries (exactly, e.g. `KVPY_POD=<uid>`)."""
    needles = [n.encode() for n in cmdline]
    entries = {e.encode() for e in env}
    found = []
    for pid in _pids(set(exclude)):
        args = _read(f"/proc/{pid}/cmdline")
        hit = any(n in args for n in needles)
        if not hit and entries:
            hit = not entries.isdisjoint(_read(f"/proc/{pid}/environ").split(b"\0"))
        if hit and _alive(pid):
            argv = tuple(a.decode(errors="replace") for a in args.split(b"\0") if a)
            found.append(Proc(pid=pid, cmdline=argv))
    return found


def mounts(needles: Iterable[str]) -> list[str]:
    """Mounts, in any mount namespace on the machine, whose source root or mount point
    contains one of `needles`; each as `<namespace>: <root> -> <mount point>`."""
    wanted = [n.encode() for n in needles]
    seen: set[str] = set()
    found = []
    for pid in _pids(set()):
        with contextlib.suppress(OSError):
            ns = os.readlink(f"/proc/{pid}/ns/mnt")
            if ns in seen:
                continue
            seen.add(ns)
            for line in _read(f"/proc/{pid}/mountinfo").splitlines():
                fields = line.split()
                root, target = fields[3], fields[4]
                if any(n in root or n in target for n in wanted):
                    found.append(f"{ns} (pid {pid}): {root.decode()} -> {target.decode()}")
    return found


def cgroup_partitions(vmi_uid: str) -> list[Path]:
    """The launchers' cgroup partitions (shared/cgrouppartition.py names them by the VMI
    uid)."""
    return sorted(CGROUP_ROOT.glob(f"*/machine/{partition_glob(vmi_uid)}"))


def host_libvirt_files(namespace: str) -> list[Path]:
    """Files the host's own libvirt would hold for the namespace's domains (the launchers'
    private libvirtds must never write there)."""
    return [p for d in HOST_LIBVIRT_DIRS for p in d.glob(f"*{namespace}_*")]


def left_by(fp: Footprint, *, exclude: Iterable[int], cgroups: bool = True) -> list[str]:
    """Everything of one VMI's run still on the node (empty once it is all gone); without
    its cgroup partitions when `cgroups` is False (the handler removes those a killed
    launcher left once it forgets the VMI, a moment after the VMI is gone)."""
    procs = processes(
        cmdline=(fp.vmi_uid, f"{fp.pod_dir}/"),
        env=(f"{POD_ENV_MARKER}={fp.pod_uid}",),
        exclude=exclude,
    )
    found = [f"process {p}" for p in procs]
    found += [f"mount {m}" for m in mounts([fp.pod_uid])]
    if cgroups:
        found += [f"cgroup {c}" for c in cgroup_partitions(fp.vmi_uid)]
    if fp.pod_dir.exists():
        found.append(f"pod dir {fp.pod_dir}: {sorted(str(p) for p in fp.pod_dir.rglob('*'))[:20]}")
    return [f"{fp.vmi} (uid {fp.vmi_uid}, pod {fp.pod_uid}): {what}" for what in found]


def open_fds(pid: int) -> int:
    """How many file descriptors a process holds."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def zombie_children(pid: int) -> list[int]:
    """Children of `pid` that exited and were never waited for."""
    found = []
    for child in _pids(set()):
        stat = _read(f"/proc/{child}/stat")
        if not stat:
            continue
        fields = stat.rsplit(b")", 1)[1].split()
        if fields[0] == b"Z" and int(fields[1]) == pid:
            found.append(child)
    return found


def rss_kib(pid: int) -> int:
    """A process's resident set size (VmRSS), KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")
