"""The handler removes the cgroup partitions a dead launcher left, once it forgets the VMI."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from handler.cgroups import LeftoverPartitions
from shared.cgrouppartition import partition_name
from tests.unit.handler.rig import Rig
from tests.unit.handler.test_reconcile import running

HIERARCHIES = ("blkio", "cpu,cpuacct", "memory", "unified")
DEAD_PID = 2**22 + 1  # above pid_max's ceiling: never a live process


def make_partition(root: Path, uid: str, pid: int, *, hierarchy: str) -> Path:
    """A partition as libvirt leaves it: the machine cgroup and its thread groups inside."""
    partition = root / hierarchy / "machine" / f"{partition_name(uid, pid)}.partition"
    for sub in ("emulator", "vcpu0"):
        (partition / "qemu-1-ns_vm.libvirt-qemu" / sub).mkdir(parents=True)
    return partition


@pytest.fixture
def live_launcher() -> Iterator[tuple[str, int]]:
    """A process carrying a VMI uid on its command line, as a running launcher does.

    Yielded once it has exec'd: a child just forked still shows pytest's command line."""
    uid = "1f1f1f1f-2222-3333-4444-555555555555"
    proc = subprocess.Popen(["sh", "-c", "sleep 600; :", "launcher", "--uid", uid])
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.monotonic() + 10
    while uid.encode() not in cmdline.read_bytes():
        assert time.monotonic() < deadline, "the stand-in launcher did not exec within 10 s"
        time.sleep(0.01)
    yield uid, proc.pid
    proc.kill()
    proc.wait(timeout=10)


def test_sweep_removes_a_dead_launchers_partition_in_every_hierarchy(tmp_path: Path) -> None:
    """Every hierarchy's partition of the VMI goes with libvirt's cgroups inside; another
    VMI's partition and the machine directories stay."""
    uid, other = "0a0b0c0d-0000-1111-2222-333333333333", "9f9f9f9f-0000-1111-2222-333333333333"
    mine = [make_partition(tmp_path, uid, DEAD_PID, hierarchy=h) for h in HIERARCHIES]
    theirs = make_partition(tmp_path, other, DEAD_PID, hierarchy="blkio")
    sweeper = LeftoverPartitions(root=tmp_path)
    assert sweeper.find(uid) == sorted(mine)
    assert sweeper.sweep(uid) == []
    assert not any(p.exists() for p in mine)
    assert theirs.is_dir()
    assert all((tmp_path / h / "machine").is_dir() for h in HIERARCHIES)


def test_sweep_finds_a_pure_cgroup_v2_partition(tmp_path: Path) -> None:
    """On a unified-only host the partition sits at <root>/machine."""
    uid = "0a0b0c0d-0000-1111-2222-333333333333"
    (tmp_path / "machine").mkdir()
    partition = tmp_path / "machine" / f"{partition_name(uid, DEAD_PID)}.partition"
    partition.mkdir()
    assert LeftoverPartitions(root=tmp_path).sweep(uid) == []
    assert not partition.exists()


def test_sweep_leaves_a_live_launchers_partition(
    tmp_path: Path, live_launcher: tuple[str, int]
) -> None:
    """A launcher of the same VMI still running (a migration's other end on this host)
    keeps its partition; only the dead one's goes."""
    uid, pid = live_launcher
    alive = make_partition(tmp_path, uid, pid, hierarchy="blkio")
    dead = make_partition(tmp_path, uid, DEAD_PID, hierarchy="blkio")
    assert LeftoverPartitions(root=tmp_path).sweep(uid) == []
    assert alive.is_dir()
    assert not dead.exists()


def test_sweep_reports_a_partition_that_cannot_go(tmp_path: Path) -> None:
    """A cgroup that cannot be removed (EBUSY on cgroupfs; here a non-empty directory)
    is returned, and the rest is still removed."""
    uid = "0a0b0c0d-0000-1111-2222-333333333333"
    busy = make_partition(tmp_path, uid, DEAD_PID, hierarchy="memory")
    (busy / "qemu-1-ns_vm.libvirt-qemu" / "tasks").write_text("4242\n")
    clean = make_partition(tmp_path, uid, DEAD_PID, hierarchy="blkio")
    assert LeftoverPartitions(root=tmp_path).sweep(uid) == [busy]
    assert not clean.exists()
    assert not (busy / "qemu-1-ns_vm.libvirt-qemu" / "vcpu0").exists()


async def test_forgetting_a_vmi_sweeps_its_partitions(tmp_path: Path) -> None:
    """The reconcile loop sweeps a VMI's partitions when the VMI is gone, not before."""
    rig = Rig()
    rig.reconciler = rig.fresh_reconciler(partitions=LeftoverPartitions(root=tmp_path))
    key = await running(rig)
    uid = rig.api.vmi(key).uid
    partition = make_partition(tmp_path, uid, DEAD_PID, hierarchy="blkio")
    await rig.process(key)
    assert partition.is_dir()
    rig.api.delete_vmi(key, finalized=True)
    rig.informer_sync()
    await rig.reconciler.process(key)
    assert not partition.exists()


def test_a_busy_partition_is_tried_again_at_the_next_sweep(tmp_path: Path) -> None:
    """A partition that could not go (its QEMU not reaped yet) is removed by a later sweep,
    when another VMI is forgotten."""
    uid, other = "0a0b0c0d-0000-1111-2222-333333333333", "9f9f9f9f-0000-1111-2222-333333333333"
    busy = make_partition(tmp_path, uid, DEAD_PID, hierarchy="memory")
    tasks = busy / "qemu-1-ns_vm.libvirt-qemu" / "tasks"
    tasks.write_text("4242\n")
    sweeper = LeftoverPartitions(root=tmp_path)
    assert sweeper.sweep(uid) == [busy]
    tasks.unlink()  # the process was reaped
    assert sweeper.sweep(other) == []
    assert not busy.exists()
