"""Filesystem freeze with the automatic thaw (launcher.freeze)."""

from __future__ import annotations

import asyncio

import pytest

from launcher.freeze import Freezer
from shared.wire.errors import CommandFailed, ErrorCode, InvalidArgument
from shared.wire.launcher_api import FreezeArgs


class FakeVirt:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.thawed = asyncio.Event()
        self.fail_thaw = False

    async def fs_freeze(self, name: str) -> int:
        self.calls.append("freeze")
        return 1

    async def fs_thaw(self, name: str) -> int:
        self.calls.append("thaw")
        self.thawed.set()
        if self.fail_thaw:
            raise CommandFailed(ErrorCode.AGENT_NOT_CONNECTED, "gone")
        return 1


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_freeze_twice_freezes_once_and_unfreeze_thaws() -> None:
    """A frozen guest is not frozen again (its deadline is renewed); unfreeze thaws once, and
    unfreezing a thawed guest is a no-op; each change (only) is announced."""
    virt, changes = FakeVirt(), []
    freezer = Freezer(virt, "ns_vm", on_change=lambda: changes.append(freezer.frozen))
    await freezer.freeze(300)
    await freezer.freeze(300)
    assert freezer.frozen and virt.calls == ["freeze"]
    await freezer.thaw()
    await freezer.thaw()
    assert not freezer.frozen and virt.calls == ["freeze", "thaw"]
    assert changes == [True, False]


async def test_the_guest_is_thawed_once_its_timeout_passes() -> None:
    """run() thaws by itself when the deadline of the last freeze is reached, and keeps
    running when the thaw fails (the guest or its agent gone)."""
    virt, clock = FakeVirt(), Clock()
    freezer = Freezer(virt, "ns_vm", clock=clock)
    virt.fail_thaw = True
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(freezer.run())
        await freezer.freeze(0.01)
        clock.now += 1
        await asyncio.wait_for(virt.thawed.wait(), 5)
        task.cancel()
    assert virt.calls == ["freeze", "thaw"] and not freezer.frozen


async def test_a_zero_timeout_never_thaws_by_itself() -> None:
    """unfreezeTimeout 0: frozen until unfreeze."""
    virt = FakeVirt()
    freezer = Freezer(virt, "ns_vm")
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(freezer.run())
        await freezer.freeze(0)
        await asyncio.sleep(0.05)
        assert virt.calls == ["freeze"]
        task.cancel()


@pytest.mark.parametrize("args", [{}, {"unfreezeTimeoutSeconds": -1},
                                  {"unfreezeTimeoutSeconds": "5m"},
                                  {"unfreezeTimeoutSeconds": 1, "x": 1}])  # fmt: skip
def test_freeze_arguments_are_checked(args: dict[str, object]) -> None:
    """The wire arguments: a number of seconds ≥ 0, nothing else."""
    with pytest.raises(InvalidArgument):
        FreezeArgs.from_wire(args)


class SlowAgent(FakeVirt):
    """An agent that answers the freeze only once `answer` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = asyncio.Event()

    async def fs_freeze(self, name: str) -> int:
        self.calls.append("freeze")
        await self.answer.wait()
        return 1

    async def fs_thaw(self, name: str) -> int:
        await asyncio.sleep(0)  # libvirt's thaw takes a while: others run meanwhile
        return await super().fs_thaw(name)


async def test_a_thaw_during_a_freeze_in_flight_undoes_it_when_it_lands() -> None:
    """The caller gave up on a freeze the agent has not answered and asked for a thaw:
    the thaw returns at once, and the freeze, when it lands, is thawed (once, not again by
    run()) and fails."""
    virt = SlowAgent()
    freezer = Freezer(virt, "ns_vm")

    async def give_up_then_answer() -> None:
        await asyncio.sleep(0)
        await asyncio.wait_for(freezer.thaw(), 1)
        assert virt.calls == ["freeze"]
        virt.answer.set()

    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(freezer.run())
        tg.create_task(give_up_then_answer())
        with pytest.raises(CommandFailed, match="thawed at once"):
            await freezer.freeze(300)
        await asyncio.sleep(0.01)
        runner.cancel()
    assert virt.calls == ["freeze", "thaw"] and not freezer.frozen  # thawed once


async def test_a_freeze_whose_caller_went_away_is_thawed_at_its_deadline() -> None:
    """The freeze call cancelled while the agent had not answered: counted frozen until
    its unfreezeTimeout, then thawed by run() all the same."""
    virt, clock = SlowAgent(), Clock()
    freezer = Freezer(virt, "ns_vm", clock=clock)
    async with asyncio.TaskGroup() as tg:
        runner = tg.create_task(freezer.run())
        freezing = tg.create_task(freezer.freeze(0.01))
        await asyncio.sleep(0)
        freezing.cancel()
        await asyncio.sleep(0)
        assert freezer.frozen
        clock.now += 1
        await asyncio.wait_for(virt.thawed.wait(), 5)
        runner.cancel()
    assert not freezer.frozen
