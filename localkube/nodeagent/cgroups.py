"""A cgroup per container, so the agent ends all of a container's processes when its main
process dies, as a runtime ends a container's cgroup.

A container's helpers can leave its process group, session and environment (the
launcher's libvirtd starts QEMU in a session of its own with a clean environment), but not
its cgroup in a hierarchy nobody else manages: here the cgroup v1 ``pids`` hierarchy
(libvirt moves QEMU between the v1 controllers it manages — cpu, memory, devices, freezer
and a few more — and pids is none of them). On a pure cgroup v2 host the unified tree is
used; libvirt's machine cgroups may then take QEMU out of it, and the pod-level reapers
(environment marker, pod directory) remain the fallback.

Layout: ``<hierarchy>/kvpy/<cluster marker>/<node>/<pod uid>/<container>``. The container's
shell prologue joins its cgroup before it execs the program (runtime.py), so every
descendant is born inside.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import structlog

log = structlog.get_logger()
CGROUP_FS = Path("/sys/fs/cgroup")


def hierarchy(root: Path = CGROUP_FS) -> Path | None:
    """The v1 pids hierarchy, else a pure v2 tree; None when neither is mounted."""
    if (root / "pids" / "cgroup.procs").is_file():
        return root / "pids"
    if (root / "cgroup.controllers").is_file():
        return root
    return None


@dataclass(frozen=True, slots=True)
class Cgroup:
    """One cgroup directory (a container's, or a pod's holding its containers')."""

    path: Path

    @classmethod
    def make(cls, path: Path) -> Cgroup | None:
        """Create it (and its parents); None, logged, when cgroups are not writable here."""
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            log.warning("container_cgroup_unavailable", path=str(path), error=str(e))
            return None
        return cls(path)

    @property
    def procs_file(self) -> Path:
        return self.path / "cgroup.procs"

    def pids(self) -> list[int]:
        """Every process in this cgroup and below it. Cgroups that vanish while being
        walked (a runtime removing them as containers end) are skipped, not an error:
        os.walk ignores them."""
        found: list[int] = []
        for sub, _, _ in os.walk(self.path):
            with contextlib.suppress(OSError, ValueError):
                found.extend(int(pid) for pid in Path(sub, "cgroup.procs").read_text().split())
        return found

    def kill(self) -> list[int]:
        """SIGKILL every process in it once (forks made meanwhile escape this pass)."""
        pids = self.pids()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        return pids

    async def empty(self, *, timeout: float = 10.0) -> list[int]:
        """SIGKILL until no process is left (new forks included) or ``timeout`` passes;
        then remove the directories. Returns every pid it signalled."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        killed: set[int] = set()
        while pids := self.kill():
            killed.update(pids)
            if loop.time() > deadline:
                log.warning("cgroup_not_emptied", path=str(self.path), pids=pids)
                return sorted(killed)
            await asyncio.sleep(0.05)
        self.remove()
        return sorted(killed)

    def remove(self) -> None:
        """Remove the (empty) directories, deepest first; a busy one stays, logged."""
        if not self.path.is_dir():
            return
        for sub, _, _ in os.walk(self.path, topdown=False):
            with contextlib.suppress(OSError):
                os.rmdir(sub)
        if self.path.exists():
            log.warning("cgroup_left_behind", path=str(self.path))


def prune(path: Path, *, stop_at: Path) -> None:
    """Remove ``path`` and its empty parents up to (not including) ``stop_at``."""
    while path != stop_at and path.is_relative_to(stop_at):
        try:
            path.rmdir()
        except OSError:
            return
        path = path.parent
