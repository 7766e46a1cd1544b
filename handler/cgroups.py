"""Leftover launcher cgroup partitions, removed once the handler forgets a VMI.

A launcher removes its partition (shared/cgrouppartition.py) when it stops; a launcher
that is SIGKILLed (the pod's grace ended, OOM) or whose QEMU was still exiting leaves it,
with libvirt's empty machine cgroups inside. As KubeVirt's handler cleans what a dead
launcher left on its node, ours removes the VMI's partitions when it forgets the VMI (the
VMI is gone here, so its launchers on this node have ended). A partition whose launcher
(the pid in its name, with the VMI uid on its command line) still runs is left alone: the
target of a migration on the same host. Only ``rmdir`` is used: a cgroup that still holds
a process stays (EBUSY), and is logged.
"""

from __future__ import annotations

import os
from pathlib import Path

import structlog

from shared.cgrouppartition import SUFFIX, partition_glob

log = structlog.get_logger("handler.cgroups")
CGROUP_ROOT = Path("/sys/fs/cgroup")


class LeftoverPartitions:
    def __init__(self, *, root: Path = CGROUP_ROOT) -> None:
        self._root = root
        self._busy: set[str] = set()  # VMI uids whose partitions still held a process

    def find(self, vmi_uid: str) -> list[Path]:
        """The VMI's partitions in every hierarchy (v1, hybrid or pure v2)."""
        pattern = partition_glob(vmi_uid)
        return sorted(
            [*self._root.glob(f"machine/{pattern}"), *self._root.glob(f"*/machine/{pattern}")]
        )

    def sweep(self, vmi_uid: str) -> list[Path]:
        """Remove the VMI's partitions, deepest cgroups first; what could not go (a killed
        launcher's QEMU not reaped yet) is returned, logged, and tried again at every
        later sweep."""
        left = []
        for uid in sorted({vmi_uid, *self._busy}):
            busy = self._sweep_one(uid)
            if busy:
                self._busy.add(uid)
                log.warning("cgroup_partition_busy", vmi_uid=uid, paths=[str(p) for p in busy])
            else:
                self._busy.discard(uid)
            left += busy
        return left

    def _sweep_one(self, vmi_uid: str) -> list[Path]:
        left = []
        for partition in self.find(vmi_uid):
            if _launcher_alive(partition, vmi_uid):
                continue
            if _rmdir_tree(partition):
                log.info("cgroup_partition_removed", path=str(partition))
            else:
                left.append(partition)
        return left


def _launcher_alive(partition: Path, vmi_uid: str) -> bool:
    pid = partition.name.removesuffix(SUFFIX).rpartition("-")[2]
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return vmi_uid.encode() in f.read()
    except (OSError, ValueError):
        return False


def _rmdir_tree(root: Path) -> bool:
    """rmdir every cgroup under root, bottom-up (their files cannot be unlinked)."""
    removed = True
    for sub, _, _ in os.walk(root, topdown=False):
        try:
            os.rmdir(sub)
        except FileNotFoundError:
            continue
        except OSError:
            removed = False
    return removed
