"""The launcher's memory dumps (launcher/memorydump.py): one at a time, in the background,
into the volume's file in hotplug-disks; asking again answers the same dump's state (by
file name); a libvirt failure is Failed with its reason."""

from __future__ import annotations

import asyncio
from pathlib import Path

from launcher.errors import LibvirtFailure
from launcher.memorydump import MemoryDumpConfig, MemoryDumps
from shared.wire.memorydump import DumpState, MemoryDumpArgs


class FakeVirt:
    def __init__(self, *, fail: str | None = None) -> None:
        self.dumps: list[tuple[str, str]] = []
        self.fail = fail
        self.release = asyncio.Event()

    async def core_dump(self, name: str, path: str, *, timeout: float) -> None:
        self.dumps.append((name, path))
        await self.release.wait()
        if self.fail:
            raise LibvirtFailure(self.fail)


async def _settled(dumps: MemoryDumps) -> None:
    for _ in range(50):
        if dumps.last is not None and dumps.last.state is not DumpState.IN_PROGRESS:
            return
        await asyncio.sleep(0)


async def test_a_dump_runs_once_and_completes(tmp_path: Path) -> None:
    """The first ask starts it (InProgress, a start time); asking again while it runs, or
    for another file, answers it; once done, Completed with an end time."""
    virt = FakeVirt()
    times = iter(["t0", "t1"])
    dumps = MemoryDumps(virt=virt, domain=lambda: "ns_vm",
                        config=MemoryDumpConfig(disks_dir=tmp_path), now=lambda: next(times))  # fmt: skip
    args = MemoryDumpArgs(volume="dump", file_name="a.memory.dump")
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(dumps.run())
        first = dumps.request(args)
        assert (first.state, first.start_timestamp) == (DumpState.IN_PROGRESS, "t0")
        await asyncio.sleep(0)
        assert (
            dumps.request(MemoryDumpArgs(volume="dump", file_name="b")).file_name == args.file_name
        )
        virt.release.set()
        await _settled(dumps)
        runner.cancel()
    done = dumps.request(args)
    assert (done.state, done.end_timestamp) == (DumpState.COMPLETED, "t1")
    assert virt.dumps == [("ns_vm", str(tmp_path / "dump.img"))]


async def test_a_libvirt_failure_fails_the_dump_naming_why(tmp_path: Path) -> None:
    """libvirt refuses: Failed, the reason carrying libvirt's words."""
    virt = FakeVirt(fail="no space left on device")
    virt.release.set()
    dumps = MemoryDumps(virt=virt, domain=lambda: "ns_vm",
                        config=MemoryDumpConfig(disks_dir=tmp_path), now=lambda: "t")  # fmt: skip
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(dumps.run())
        dumps.request(MemoryDumpArgs(volume="dump", file_name="a"))
        await _settled(dumps)
        runner.cancel()
    assert dumps.last is not None and dumps.last.state is DumpState.FAILED
    assert "no space left on device" in (dumps.last.reason or "")
