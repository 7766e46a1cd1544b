"""The soak's samples: resident memory and open files of one real-node cluster's daemons.

Every `sample()` walks /proc once and keeps, for this cluster only, each virt-handler and
virt-controller (pod processes: their cgroup lies under one of the nodes' cgroup roots)
and each kubelet (a host process whose argv names this cluster's nodes dir): VmRSS from
/proc/<pid>/status and the entries of /proc/<pid>/fd. A daemon is named by its role and
node (`virt-handler@node01`, `virt-controller@node02#2` when two share a node); a pid that
changes under the same name is a restart, counted and shown.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ENTRY_POINTS = {b"virt-handler-py": "virt-handler", b"virt-controller-py": "virt-controller"}


@dataclass(frozen=True, slots=True)
class Reading:
    pid: int
    rss_mib: float
    fds: int


@dataclass(frozen=True, slots=True)
class Sample:
    minute: float
    readings: Mapping[str, Reading]  # daemon name ->


def _rss_mib(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None


def _fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def _cgroup_root(pid: int, roots: Mapping[str, str]) -> str | None:
    """The node whose cgroup root holds `pid`, if any."""
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        for root, node in roots.items():
            if path.startswith(root + "/"):
                return node
    return None


@dataclass
class DaemonSampler:
    """`cgroup_roots`: node cgroup root -> node; `nodes_dir`: the nodes' dirs on the host."""

    cgroup_roots: Mapping[str, str]
    nodes_dir: Path
    restarts: dict[str, int] = field(default_factory=dict)
    _last_pid: dict[str, int] = field(default_factory=dict)

    def _role(self, pid: int, argv: list[bytes]) -> tuple[str, str] | None:
        """(role, node) of one of the daemons we follow, else None."""
        if argv and os.path.basename(argv[0]) == b"kubelet":
            marker = f"{self.nodes_dir}/".encode()
            for arg in argv:
                if marker in arg:
                    node = arg.split(marker, 1)[1].split(b"/", 1)[0].decode()
                    return "kubelet", node
            return None
        for arg in argv[:2]:
            daemon = ENTRY_POINTS.get(os.path.basename(arg))
            if daemon is not None:
                on = _cgroup_root(pid, self.cgroup_roots)
                return (daemon, on) if on is not None else None
        return None

    def _found(self) -> dict[str, int]:
        """Daemon name -> pid, now."""
        by_role: dict[tuple[str, str], list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                argv = Path("/proc", entry, "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (found := self._role(int(entry), argv)) is not None:
                by_role.setdefault(found, []).append(int(entry))
        names: dict[str, int] = {}
        for (role, node), pids in sorted(by_role.items()):
            for i, pid in enumerate(sorted(pids, key=_start_time)):
                names[f"{role}@{node}" + (f"#{i + 1}" if i else "")] = pid
        return names

    def sample(self, minute: float) -> Sample:
        readings: dict[str, Reading] = {}
        for name, pid in self._found().items():
            rss, fds = _rss_mib(pid), _fds(pid)
            if rss is None or fds is None:
                continue  # exited between the walk and the read
            if self._last_pid.get(name, pid) != pid:
                self.restarts[name] = self.restarts.get(name, 0) + 1
            self._last_pid[name] = pid
            readings[name] = Reading(pid=pid, rss_mib=rss, fds=fds)
        return Sample(minute=minute, readings=readings)


def _start_time(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(text[text.rindex(")") + 2 :].split()[19])


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    name: str
    rss_first: float
    rss_last: float
    fds_first: float
    fds_last: float
    flat: bool


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def verdicts(
    samples: list[Sample], *, window: float, margin: float, rss_slack: float, fd_slack: float
) -> list[Verdict]:
    """Per daemon: mean RSS and open files over the first and the last `window` minutes;
    flat when the last is within `margin` (a fraction) plus the slack of the first."""
    if not samples:
        return []
    end = samples[-1].minute
    first = [s for s in samples if s.minute <= window]
    last = [s for s in samples if s.minute >= end - window]
    names = sorted({n for s in samples for n in s.readings})
    out = []
    for name in names:
        r0 = [s.readings[name] for s in first if name in s.readings]
        r1 = [s.readings[name] for s in last if name in s.readings]
        rss0, rss1 = _mean([r.rss_mib for r in r0]), _mean([r.rss_mib for r in r1])
        fd0, fd1 = _mean([float(r.fds) for r in r0]), _mean([float(r.fds) for r in r1])
        flat = rss1 <= rss0 * (1 + margin) + rss_slack and fd1 <= fd0 * (1 + margin) + fd_slack
        out.append(Verdict(name=name, rss_first=rss0, rss_last=rss1, fds_first=fd0,
                           fds_last=fd1, flat=flat))  # fmt: skip
    return out


def table(samples: list[Sample], cycles: Mapping[float, int]) -> str:
    """One row per sample: minute, churn cycles done, then RSS MiB / open files per daemon."""
    names = sorted({n for s in samples for n in s.readings})
    head = ["min", "cycles", *names]
    rows = [head]
    for s in samples:
        cells = [f"{s.minute:.1f}", str(cycles.get(s.minute, 0))]
        for n in names:
            r = s.readings.get(n)
            cells.append(f"{r.rss_mib:.1f}/{r.fds}" if r else "-")
        rows.append(cells)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
