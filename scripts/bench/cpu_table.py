"""The host CPU of a measurement window split by component, from proc_sampler snapshots.

Rules (so that nothing is counted twice and what exited is not lost):
- a host process counts utime+stime+cutime+cstime over the window (what it reaped: CNI
  plugins and `shim start` for containerd, runc for the shims, mount helpers for kubelet);
  a process that exited during the window counts its last sample, unless the process that
  would reap it is one we count (it is in that one's cutime);
- a pod counts its cpuacct cgroup (lossless); inside launcher pods the launcher and
  libvirtd (each with what they reaped), tini (with what it reaped: libvirt's QEMU
  capability probes) and the guest's QEMU are split out of it by /proc, QEMU cut at the
  guest's boot marker; what exited containers of a pod spent (init containers copying the
  containerDisk and kernel out of their images) is the pod total less its running
  containers' cgroups, and is taken out of the shims, which reaped those processes;
- "other" is the host's busy time less everything above.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from proc_sampler import Boot, PodSample, ProcSample, Role, Snapshot

LAUNCHER_POD, HANDLER_POD, CONTROLLER_POD = "virt-launcher", "virt-handler", "virt-controller"

ROWS: tuple[tuple[str, str], ...] = (
    ("kubelet", "kubelet (+ what it runs: mount, …)"),
    ("containerd", "containerd (+ CNI plugins, shim start)"),
    ("shim", "containerd-shim + runc"),
    ("init", "launcher pod: init containers (disk/kernel copy)"),
    ("launcher", "launcher (Python; + qemu-img, genisoimage)"),
    ("libvirtd", "libvirtd"),
    ("tini", "tini (+ libvirt's QEMU probes it reaps)"),
    ("pod_rest", "launcher pod: rest (pause, runc init, …)"),
    ("qemu_boot", "QEMU: start -> guest boot marker"),
    ("qemu_after", "QEMU: guest after the marker (qemu-ga, DHCP, idle)"),
    ("handler", "virt-handler pods"),
    ("controller", "virt-controller pods"),
    ("other_pods", "other pods"),
    ("control_plane", "control plane + kube-proxy"),
    ("bench", "this benchmark (API client, sampler)"),
    ("other", "other: rest of the host (other users, kernel)"),
)
RUNTIME = ("kubelet", "containerd", "shim", "init")
KUBEVIRT_PY = ("launcher", "libvirtd", "tini", "pod_rest", "handler", "controller")
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pod start: kubelet, containerd, shim, runc, init", RUNTIME),
    ("kubevirt-py: launcher, libvirtd, tini, rest, daemons", KUBEVIRT_PY),
    ("QEMU start + guest boot (to the marker)", ("qemu_boot",)),
)
HOST_ROWS = {
    Role.KUBELET: "kubelet",
    Role.CONTAINERD: "containerd",
    Role.SHIM: "shim",
    Role.CONTROL_PLANE: "control_plane",
    Role.BENCH: "bench",
}


@dataclass
class Window:
    """Snapshots from the window's start to its end; every process's latest sample."""

    first: Snapshot
    last: Snapshot
    seen: dict[tuple[int, int], ProcSample] = field(default_factory=dict)
    reaped_by_ours: dict[tuple[int, int], bool] = field(default_factory=dict)
    pods: dict[str, PodSample] = field(default_factory=dict)

    @classmethod
    def start(cls, snap: Snapshot) -> Window:
        window = cls(first=snap, last=snap)
        window.add(snap)
        return window

    def add(self, snap: Snapshot) -> None:
        pids = {pid for pid, _ in snap.procs}
        for key, sample in snap.procs.items():
            self.seen[key] = sample
            self.reaped_by_ours[key] = sample.ppid in pids
        self.pods.update(snap.pods)
        self.last = snap

    @property
    def seconds(self) -> float:
        return self.last.at - self.first.at


def split(
    window: Window, pod_roles: Mapping[str, str], boots: Mapping[str, Boot]
) -> dict[str, float]:
    """CPU-seconds per row of ROWS over the window (pod_roles: pod UID -> its kubevirt.io
    label; boots: launcher pod UID -> the boot marker's cut)."""
    rows: dict[str, float] = defaultdict(float)
    for key, sample in window.seen.items():
        if key not in window.last.procs and window.reaped_by_ours[key]:
            continue  # in its parent's cutime
        before = window.first.procs.get(key)
        own = sample.own - (before.own if before else 0.0)
        reaped = sample.reaped - (before.reaped if before else 0.0)
        if sample.role in HOST_ROWS:
            rows[HOST_ROWS[sample.role]] += own + reaped
        elif pod_roles.get(sample.pod) != LAUNCHER_POD:
            continue
        elif sample.role is Role.QEMU:
            boot = boots.get(sample.pod)
            cut = min(boot.qemu_cpu - (before.own if before else 0.0), own) if boot else own
            rows["qemu_boot"] += cut
            rows["qemu_after"] += own - cut
        else:
            rows[str(sample.role)] += own + reaped
    exited = _pod_rows(window, pod_roles, rows)
    rows["shim"] -= exited
    inside = ("launcher", "libvirtd", "tini", "qemu_boot", "qemu_after")
    rows["pod_rest"] = rows.pop("launcher_pods", 0.0) - rows["init"] - sum(rows[r] for r in inside)
    accounted = sum(v for k, v in rows.items() if k != "other")
    rows["other"] = window.last.host_busy - window.first.host_busy - accounted
    return dict(rows)


def _pod_rows(window: Window, pod_roles: Mapping[str, str], rows: dict[str, float]) -> float:
    """Pod cgroup totals into rows; what exited containers of all pods spent."""
    exited_all = 0.0
    for uid, pod in window.pods.items():
        before = window.first.pods.get(uid)
        total = pod.total - (before.total if before else 0.0)
        exited = (pod.total - pod.live) - ((before.total - before.live) if before else 0.0)
        exited_all += exited
        role = pod_roles.get(uid, "")
        if role == LAUNCHER_POD:
            rows["launcher_pods"] += total
            rows["init"] += exited
        elif role == HANDLER_POD:
            rows["handler"] += total
        elif role == CONTROLLER_POD:
            rows["controller"] += total
        else:
            rows["other_pods"] += total
    return exited_all


def checks(window: Window, pod_roles: Mapping[str, str], boots: Mapping[str, Boot]) -> str:
    """What a reader needs to trust the split: the shims reaped at least what exited
    containers spent (else their row is wrong), boot markers seen, processes lost."""
    shim_reaped = 0.0
    for key, sample in window.seen.items():
        if sample.role is Role.SHIM:
            before = window.first.procs.get(key)
            shim_reaped += sample.reaped - (before.reaped if before else 0.0)
    exited = _pod_rows(window, pod_roles, defaultdict(float))
    launchers = sum(1 for uid in window.pods if pod_roles.get(uid) == LAUNCHER_POD)
    gone = [k for k in window.seen if k not in window.last.procs]
    unreaped = sum(1 for k in gone if not window.reaped_by_ours[k])
    return (
        f"shims reaped {shim_reaped:.2f} CPU-s, exited containers spent {exited:.2f} of it; "
        f"boot markers {sum(1 for u in boots if u in window.pods)}/{launchers}; "
        f"{len(window.seen)} processes sampled, {len(gone)} exited "
        f"({unreaped} not reaped by a sampled parent: their last sample counted)"
    )


def print_table(rows: Mapping[str, float], *, vmis: int, seconds: float) -> None:
    host = sum(rows.values())
    cluster = host - rows.get("other", 0.0)
    n = max(1, vmis)
    print(
        f"(g) host CPU per VMI by component, {n} VMIs, window {seconds:.0f} s "
        f"(first create -> all guests booted), host busy {host:.1f} CPU-s"
    )
    print(f"    {'component':56s} {'CPU-s/VMI':>9s} {'of host':>7s} {'of ours':>7s}")

    def line(label: str, value: float, *, ours: bool = True) -> None:
        of_host = f"{100 * value / host:6.1f}%" if host else "      -"
        of_ours = f"{100 * value / cluster:6.1f}%" if ours and cluster > 0 else "      -"
        print(f"    {label:56s} {value / n:9.3f} {of_host} {of_ours}")

    for key, label in ROWS:
        line(label, rows.get(key, 0.0), ours=key != "other")
    line("host busy (all of the above)", host, ours=False)
    line("ours: this cluster + this benchmark (all but other)", cluster)
    for label, keys in GROUPS:
        line(f"= {label}", sum(rows.get(k, 0.0) for k in keys))
