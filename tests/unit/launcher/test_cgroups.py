"""The launcher's cgroup partition: made in every hierarchy, removed on the way out, with a
bounded retry while a cgroup is still busy (QEMU exiting after libvirtd stopped)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from launcher.cgroups import Partition


def _hierarchies(root: Path) -> list[Path]:
    """A v1 layout: two controller hierarchies, no cgroup.controllers at the root."""
    dirs = [root / "cpu", root / "memory"]
    for d in dirs:
        d.mkdir(parents=True)
    return dirs


def _busy(partition_dir: Path) -> Path:
    """A domain cgroup inside the partition that refuses rmdir (a file in it stands for a
    task still attached)."""
    domain = partition_dir / "qemu-1-default.libvirt-qemu"
    domain.mkdir()
    (domain / "task").write_text("1")
    return domain


async def test_release_waits_for_a_busy_cgroup_then_removes_everything(tmp_path: Path) -> None:
    """A cgroup that is busy for a while is retried until it empties: nothing is left."""
    cpu, memory = _hierarchies(tmp_path)
    part = Partition("kvpy-u-1", root=tmp_path)
    assert part.create()
    busy = _busy(cpu / "machine" / "kvpy-u-1.partition")

    async def qemu_exits() -> None:
        await asyncio.sleep(0.15)
        (busy / "task").unlink()

    async with asyncio.TaskGroup() as tg:
        tg.create_task(qemu_exits())
        await part.release(within=5.0, pause=0.02)
    assert not (cpu / "machine" / "kvpy-u-1.partition").exists()
    assert not (memory / "machine" / "kvpy-u-1.partition").exists()


async def test_release_gives_up_after_its_bound_and_says_what_it_left(tmp_path: Path) -> None:
    """A cgroup that stays busy is left (for the handler's sweep) once the bound passes,
    logged by path; the hierarchies that could be cleaned are."""
    cpu, memory = _hierarchies(tmp_path)
    part = Partition("kvpy-u-2", root=tmp_path)
    assert part.create()
    _busy(cpu / "machine" / "kvpy-u-2.partition")
    with structlog.testing.capture_logs() as logs:
        await part.release(within=0.1, pause=0.02)
    left = [e["path"] for e in logs if e["event"] == "cgroup_partition_left"]
    assert left == [str(cpu / "machine" / "kvpy-u-2.partition")]
    assert not (memory / "machine" / "kvpy-u-2.partition").exists()


def test_remove_is_one_pass(tmp_path: Path) -> None:
    """remove() (a failed create's cleanup) does not wait: one pass, what is busy logged."""
    cpu, _ = _hierarchies(tmp_path)
    part = Partition("kvpy-u-3", root=tmp_path)
    assert part.create()
    _busy(cpu / "machine" / "kvpy-u-3.partition")
    with structlog.testing.capture_logs() as logs:
        part.remove()
    assert [e["event"] for e in logs] == ["cgroup_partition_left"]
