"""Samples the host CPU of one real-node cluster's processes and pods, so that what exits
during a measurement window is not lost.

Every ``snapshot()`` reads:
- /proc/<pid>/stat of every process (utime+stime, and cutime+cstime: what it reaped), kept
  for the processes of this cluster, classified once per (pid, start time, comm) from their
  cmdline and cpuacct cgroup: kubelet, containerd, containerd-shim, the control plane
  (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kube-proxy) by the
  cluster's paths in their argv; inside the nodes' pod cgroups, the launcher (Python),
  libvirtd, tini and the guest's QEMU; this process itself;
- cpuacct.usage of each pod cgroup under the nodes' cgroup roots (every process the pod
  ever ran: init containers, runc init, pause, …) and of its child cgroups that still hold
  processes (running containers), so what exited containers spent is their difference;
- the serial log of each running guest, for the guest's boot marker: the first snapshot
  that sees it records that QEMU's CPU then (start + boot, cut at the marker).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
BOOT_MARKER = b"KUBEVIRT-PY-GUEST-BOOTED"
KTHREADD = 2  # the kernel threads' parent (and pid 2 itself)
SERIAL_LOG = "volumes/kubernetes.io~empty-dir/private/libvirt/log/kvpy/serial.log"
CONTROL_PLANE = frozenset(
    {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"}
)
QOS_DIRS = ("", "burstable", "besteffort")


class Role(StrEnum):
    KUBELET = "kubelet"
    CONTAINERD = "containerd"
    SHIM = "containerd-shim"
    CONTROL_PLANE = "control-plane"
    BENCH = "bench"
    LAUNCHER = "launcher"
    LIBVIRTD = "libvirtd"
    TINI = "tini"
    QEMU = "qemu"


@dataclass(frozen=True, slots=True)
class ProcSample:
    role: Role
    pod: str  # the pod's UID for processes in a pod cgroup, else ""
    ppid: int
    own: float  # utime + stime, CPU-seconds
    reaped: float  # cutime + cstime: children it waited for


@dataclass(frozen=True, slots=True)
class PodSample:
    node: str
    total: float  # cpuacct.usage of the pod cgroup, CPU-seconds
    live: float  # of its child cgroups that still hold processes


@dataclass(frozen=True, slots=True)
class Snapshot:
    at: float  # time.monotonic()
    host_busy: float  # /proc/stat busy time, all cores
    procs: Mapping[tuple[int, int], ProcSample]  # (pid, start time) ->
    pods: Mapping[str, PodSample]  # pod UID ->


@dataclass(frozen=True, slots=True)
class Boot:
    at: float  # time.monotonic() of the first snapshot that saw the marker
    qemu_cpu: float  # that QEMU's own CPU-seconds then


@dataclass(frozen=True, slots=True)
class _Stat:
    comm: str
    ppid: int
    own: float
    reaped: float
    start: int


def read_stat(pid: str) -> _Stat | None:
    try:
        text = Path("/proc", pid, "stat").read_text()
    except OSError:
        return None
    comm = text[text.index("(") + 1 : text.rindex(")")]
    f = text[text.rindex(")") + 2 :].split()
    # f[0] is field 3 (state): utime is field 14 -> f[11]
    ticks = [int(v) for v in f[11:15]]
    return _Stat(
        comm=comm,
        ppid=int(f[1]),
        own=(ticks[0] + ticks[1]) / CLK_TCK,
        reaped=(ticks[2] + ticks[3]) / CLK_TCK,
        start=int(f[19]),
    )


def host_busy() -> float:
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[:7])
    return (user + nice + system + irq + softirq) / CLK_TCK


def _usage(cgroup: Path) -> float:
    try:
        return int((cgroup / "cpuacct.usage").read_text()) / 1e9
    except (OSError, ValueError):
        return 0.0


def _holds_processes(cgroup: Path) -> bool:
    try:
        return bool((cgroup / "cgroup.procs").read_text().strip())
    except OSError:
        return False


@dataclass
class Sampler:
    """Snapshots of one cluster. ``ours``: strings only this cluster's host processes carry
    in their argv (its nodes dir, its state dir); ``cgroup_roots``: node cgroup root ->
    node name; ``nodes_dir``: where each node's /var/lib/kubelet lives on the host."""

    ours: tuple[str, ...]
    cgroup_roots: Mapping[str, str]
    nodes_dir: Path
    boots: dict[str, Boot] = field(default_factory=dict)  # launcher pod UID ->
    proc: Path = Path("/proc")
    _roles: dict[tuple[int, int, str], tuple[Role | None, str]] = field(default_factory=dict)
    _serial_offsets: dict[str, int] = field(default_factory=dict)

    def snapshot(self) -> Snapshot:
        busy = host_busy()
        procs: dict[tuple[int, int], ProcSample] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or (stat := read_stat(entry)) is None:
                continue
            key = (int(entry), stat.start)
            role, pod = self._classify(key, stat.comm, ppid=stat.ppid)
            if role is not None:
                procs[key] = ProcSample(role, pod, stat.ppid, stat.own, stat.reaped)
        pods = self._pods()
        now = time.monotonic()
        for sample in procs.values():
            if sample.role is Role.QEMU and sample.pod not in self.boots:
                self._check_boot(sample, pods, now)
        return Snapshot(at=now, host_busy=busy, procs=procs, pods=pods)

    def _classify(self, key: tuple[int, int], comm: str, *, ppid: int) -> tuple[Role | None, str]:
        cache_key = (*key, comm)
        if cache_key not in self._roles:
            found = self._role_of(key[0], ppid=ppid)
            if found is None:  # gone, or between two programs: asked again next time
                return None, ""
            self._roles[cache_key] = found
        return self._roles[cache_key]

    def _role_of(self, pid: int, *, ppid: int) -> tuple[Role | None, str] | None:
        """The process's role and pod; None when that cannot be known yet. A process in
        the middle of an exec already has its new comm but no argv until the kernel has
        loaded the program (a QEMU libvirtd just forked, for one): cached under that comm
        as "not ours", it would never be looked at again and its guest's boot marker
        never seen."""
        if pid == os.getpid():
            return Role.BENCH, ""
        try:
            argv = (self.proc / str(pid) / "cmdline").read_bytes().split(b"\0")
            cgroups = (self.proc / str(pid) / "cgroup").read_text()
        except OSError:
            return None
        if not argv or not argv[0]:
            return (None, "") if KTHREADD in (pid, ppid) else None  # a kernel thread, or mid-exec
        pod = self._pod_of(cgroups)
        exe = os.path.basename(argv[0].decode(errors="replace"))
        if pod:
            return _pod_role(exe, argv), pod
        text = b" ".join(argv).decode(errors="replace")
        return (_host_role(exe) if any(m in text for m in self.ours) else None), ""

    def _pod_of(self, cgroups: str) -> str:
        """The pod UID of a process in one of the nodes' pod cgroups, else ""."""
        for line in cgroups.splitlines():
            _, controllers, path = line.split(":", 2)
            if "cpuacct" not in controllers.split(","):
                continue
            if not any(path.startswith(root + "/") for root in self.cgroup_roots):
                return ""
            parts = [p for p in path.split("/") if p.startswith("pod")]
            return parts[0].removeprefix("pod") if parts else ""
        return ""

    def _pods(self) -> dict[str, PodSample]:
        out: dict[str, PodSample] = {}
        for root, node in self.cgroup_roots.items():
            kubepods = CPUACCT / root.lstrip("/") / "kubepods"
            for qos in QOS_DIRS:
                with contextlib.suppress(OSError):
                    for pod in (kubepods / qos).iterdir():
                        if pod.is_dir() and pod.name.startswith("pod"):
                            live = sum(
                                _usage(c)
                                for c in pod.iterdir()
                                if c.is_dir() and _holds_processes(c)
                            )
                            out[pod.name.removeprefix("pod")] = PodSample(node, _usage(pod), live)
        return out

    def _check_boot(self, qemu: ProcSample, pods: Mapping[str, PodSample], now: float) -> None:
        pod = pods.get(qemu.pod)
        if pod is None:
            return
        log = self.nodes_dir / pod.node / "kubelet" / "pods" / qemu.pod / SERIAL_LOG
        offset = self._serial_offsets.get(qemu.pod, 0)
        try:
            with log.open("rb") as f:
                f.seek(max(0, offset - len(BOOT_MARKER)))
                chunk = f.read()
        except OSError:
            return
        self._serial_offsets[qemu.pod] = max(0, offset - len(BOOT_MARKER)) + len(chunk)
        if BOOT_MARKER in chunk:
            self.boots[qemu.pod] = Boot(at=now, qemu_cpu=qemu.own)


def _host_role(exe: str) -> Role | None:
    if exe in ("kubelet", "containerd"):
        return Role(exe)
    if exe.startswith("containerd-shim"):
        return Role.SHIM
    return Role.CONTROL_PLANE if exe in CONTROL_PLANE else None


def _pod_role(exe: str, argv: list[bytes]) -> Role | None:
    if any(a.endswith(b"virt-launcher-py") for a in argv[:2]):
        return Role.LAUNCHER
    if exe == "libvirtd":
        return Role.LIBVIRTD
    if exe == "tini":
        return Role.TINI
    if exe.startswith("qemu-system") and any(a.startswith(b"guest=") for a in argv):
        return Role.QEMU
    return None
