"""A cgroup partition per launcher, so domains of different daemons never share a cgroup.

Every libvirt daemon names its machine cgroup ``qemu-<id>-<name>.libvirt-qemu``; equal ids
across daemons collide. ``<resource><partition>/machine/<p></partition>`` in the domain XML
puts ours under ``machine/<p>.partition`` in each controller, which we create and remove
(shared/cgrouppartition.py names it; the handler removes what a killed launcher left).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import structlog

log = structlog.get_logger("launcher.cgroups")
CGROUP_ROOT = Path("/sys/fs/cgroup")


class Partition:
    def __init__(self, name: str, *, root: Path = CGROUP_ROOT) -> None:
        self.name = name
        self._root = root
        self._made: list[Path] = []

    @property
    def xml_path(self) -> str:
        return f"/machine/{self.name}"

    def create(self) -> bool:
        """Make the partition in every hierarchy; False (logged) when cgroups are not writable
        (a container's read-only /sys/fs/cgroup): libvirt must then use no cgroups."""
        try:
            if (self._root / "cgroup.controllers").exists():
                controllers = [self._root]  # pure cgroup v2
            else:  # v1 or hybrid: every mounted hierarchy, the unified one included
                controllers = [p for p in self._root.iterdir() if p.is_dir()]
            for ctrl in controllers:
                self._make(ctrl / "machine")
                self._make(ctrl / "machine" / f"{self.name}.partition")
        except OSError as exc:
            log.warning("cgroup_partition_skipped", reason=str(exc))
            self.remove()
            return False
        return True

    def _make(self, path: Path) -> None:
        if path.is_dir():
            return
        path.mkdir()
        if path.name != "machine":
            self._made.append(path)
        for knob in ("cpuset.cpus", "cpuset.mems"):
            parent_value = path.parent / knob
            if parent_value.exists() and not (path / knob).read_text().strip():
                (path / knob).write_text(parent_value.read_text())

    def remove(self) -> None:
        """Remove the partition with whatever libvirt left inside it, in one pass: a daemon
        stopped before it tore its domain down leaves the domain's (empty) cgroups behind."""
        for path in self._sweep():
            log.warning("cgroup_partition_left", path=str(path))
        self._made.clear()

    async def release(self, *, within: float = 5.0, pause: float = 0.05) -> None:
        """Remove the partition, trying again for up to `within` seconds while a cgroup is
        busy: a QEMU libvirtd just killed is still exiting, and a cgroup with a task in it
        refuses rmdir (EBUSY). What is still there at the end is logged and left to the
        handler's sweep of the node."""
        left = self._sweep()
        for _ in range(int(within / pause)):  # a cgroup frees itself: no event to wait on
            if not left:
                break
            await asyncio.sleep(pause)
            left = self._sweep()
        for path in left:
            log.warning("cgroup_partition_left", path=str(path))
        self._made.clear()

    def _sweep(self) -> list[Path]:
        """One bottom-up pass of rmdir over what we made; the partitions still there."""
        for path in reversed(self._made):
            for sub, _, _ in os.walk(path, topdown=False):
                with contextlib.suppress(OSError):
                    os.rmdir(sub)
        return [path for path in reversed(self._made) if path.exists()]
