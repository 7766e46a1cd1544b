"""The domain manager's decisions, against a fake libvirt behind the VirtPort seam."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from launcher.disks import DiskContext
from launcher.errors import InvalidSpec, LibvirtFailure
from launcher.manager import DomainManager, Identity
from launcher.plan import HostPaths
from launcher.virttypes import JobStats, LifecycleEvent
from shared import podlayout
from shared.wire.domain import DomainEvent, DomainState, EventType
from shared.wire.stats import DomainStats
from tests.integration.launcher.harness import tiny_vmi

UID = "11111111-2222-3333-4444-555555555555"


class FakeVirt:
    """Records calls; ``acpi_works`` decides whether shutdown powers the guest off;
    ``moves_first`` puts the guest in that state just before shutdown/destroy reach it,
    which libvirt then refuses."""

    def __init__(self, *, acpi_works: bool = True) -> None:
        self.events: asyncio.Queue[LifecycleEvent] = asyncio.Queue()
        self.calls: list[str] = []
        self.current: DomainState | None = None
        self.acpi_works = acpi_works
        self.moves_first: DomainState | None = None

    def _not_running(self) -> None:
        if self.moves_first is not None:
            self.current = self.moves_first
            raise LibvirtFailure("Requested operation is not valid: domain is not running")

    async def define(self, xml: str) -> None:
        self.calls.append("define")
        self.current = DomainState.SHUTOFF

    async def state(self, name: str) -> tuple[DomainState, int] | None:
        return None if self.current is None else (self.current, 1)

    async def start(self, name: str, *, paused: bool) -> None:
        self.calls.append(f"start(paused={paused})")
        self.current = DomainState.PAUSED if paused else DomainState.RUNNING

    async def suspend(self, name: str) -> None:
        self.current = DomainState.PAUSED

    async def resume(self, name: str) -> None:
        self.current = DomainState.RUNNING

    async def shutdown(self, name: str) -> None:
        self.calls.append("shutdown")
        self._not_running()
        if self.acpi_works:
            self.current = DomainState.SHUTOFF

    async def reboot(self, name: str) -> None:
        self.calls.append("reboot")

    async def destroy(self, name: str) -> None:
        self.calls.append("destroy")
        self._not_running()
        self.current = DomainState.SHUTOFF

    async def undefine(self, name: str) -> None:
        self.calls.append("undefine")
        self.current = None

    async def stats(self, name: str) -> DomainStats:
        return DomainStats()

    async def domain_xml(self, name: str) -> str:
        return "<domain><devices/></domain>"

    async def job_stats(self, name: str, *, completed: bool = False) -> JobStats:
        return JobStats()

    async def fs_freeze(self, name: str) -> int:
        self.calls.append("fs_freeze")
        return 1

    async def fs_thaw(self, name: str) -> int:
        self.calls.append("fs_thaw")
        return 1

    async def reset(self, name: str) -> None:
        self.calls.append("reset")

    async def agent_command(
        self,
        name: str,
        command: str,
        *,
        timeout: int = 5,
        arguments: Mapping[str, Any] | None = None,
    ) -> Any:
        return {}


def _container_disks(root: Path) -> Path:
    """A container-disks volume as the init containers leave it for the tiny guest, with
    placeholder files (raw; the overlays made on top are real qcow2)."""
    for rel in (
        podlayout.disk_file("containerdisk"),
        podlayout.kernel_file(),
        podlayout.initrd_file(),
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"k" * 512)
    return root


@pytest.fixture
def published() -> list[DomainEvent]:
    return []


@pytest.fixture
def manager_and_virt(
    tmp_path: Path, published: list[DomainEvent]
) -> tuple[DomainManager, FakeVirt]:
    virt = FakeVirt()
    manager = DomainManager(
        virt=virt,
        identity=Identity(namespace="default", name="tiny", uid=UID),
        disks=DiskContext(
            work_dir=tmp_path / "w",
            container_disks=_container_disks(tmp_path / "cd"),
            vmi_disks=tmp_path / "vmi-disks",
        ),
        host=HostPaths(
            serial_log=tmp_path / "serial.log",
            console_socket=tmp_path / "c.sock",
            agent_socket=tmp_path / "a.sock",
            partition=None,
        ),
        virt_type="qemu",
        publish=published.append,
    )
    (tmp_path / "w").mkdir()
    return manager, virt


async def test_sync_starts_once(manager_and_virt: tuple[DomainManager, FakeVirt]) -> None:
    """Sync defines and starts once; a second Sync, even after power-off, starts nothing."""
    manager, virt = manager_and_virt
    vmi = tiny_vmi(uid=UID)
    vmi["spec"]["volumes"] = vmi["spec"]["volumes"][:1]
    vmi["spec"]["domain"]["devices"]["disks"] = vmi["spec"]["domain"]["devices"]["disks"][:1]
    assert (await manager.sync(vmi)).state == DomainState.RUNNING
    virt.current = DomainState.SHUTOFF
    assert (await manager.sync(vmi)).state == DomainState.SHUTOFF
    assert virt.calls == ["define", "start(paused=False)"]


async def test_sync_refuses_a_foreign_vmi(manager_and_virt: tuple[DomainManager, FakeVirt]) -> None:
    """A VMI with another uid is refused before anything reaches libvirt."""
    manager, virt = manager_and_virt
    with pytest.raises(InvalidSpec):
        await manager.sync(tiny_vmi(uid="someone-else"))
    assert virt.calls == []


async def test_graceful_stop_resends_acpi_then_destroys(
    manager_and_virt: tuple[DomainManager, FakeVirt], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A guest that ignores ACPI gets it again every retry interval, then destroy at grace end."""
    manager, virt = manager_and_virt
    monkeypatch.setattr("launcher.manager.ACPI_RETRY_SECONDS", 0.1)
    virt.acpi_works = False
    virt.current = DomainState.RUNNING
    await manager.graceful_stop(grace=0.35, clock=time.monotonic)
    assert virt.calls.count("shutdown") >= 3
    assert virt.calls[-1] == "destroy"


async def test_graceful_stop_without_destroy_when_acpi_works(
    manager_and_virt: tuple[DomainManager, FakeVirt],
) -> None:
    """A cooperative guest is shut down by ACPI alone."""
    manager, virt = manager_and_virt
    virt.current = DomainState.RUNNING
    await manager.graceful_stop(grace=5, clock=time.monotonic)
    assert virt.calls == ["shutdown"]


@pytest.mark.parametrize(
    ("grace", "moves_to", "call"),
    [
        pytest.param(5, DomainState.SHUTOFF, "shutdown", id="acpi-off"),
        pytest.param(5, DomainState.SHUTDOWN, "shutdown", id="acpi-shutting-down"),
        pytest.param(0, DomainState.SHUTOFF, "destroy", id="destroy-off"),
    ],
)
async def test_graceful_stop_when_the_guest_moved_meanwhile(
    manager_and_virt: tuple[DomainManager, FakeVirt],
    monkeypatch: pytest.MonkeyPatch,
    grace: float,
    moves_to: DomainState,
    call: str,
) -> None:
    """The guest goes off, or starts shutting down, between the look and the call (the
    handler's kill won the race; the guest heard an earlier ACPI): libvirt's "domain is
    not running" does not end the launcher; the stop goes on."""
    manager, virt = manager_and_virt
    monkeypatch.setattr("launcher.manager.ACPI_RETRY_SECONDS", 0.05)
    virt.current = DomainState.RUNNING
    virt.moves_first = moves_to

    async def power_off_soon() -> None:
        await asyncio.sleep(0.2)
        virt.current = DomainState.SHUTOFF

    async with asyncio.TaskGroup() as tg:
        tg.create_task(power_off_soon())
        await manager.graceful_stop(grace=grace, clock=time.monotonic)
    assert virt.calls == [call]  # no button pressed for a guest already going down


@pytest.mark.parametrize("state", [DomainState.PAUSED, DomainState.SHUTDOWN])
async def test_graceful_stop_presses_no_button_it_cannot_press(
    manager_and_virt: tuple[DomainManager, FakeVirt],
    monkeypatch: pytest.MonkeyPatch,
    state: DomainState,
) -> None:
    """A paused guest cannot hear ACPI and one shutting down needs none: the stop waits
    for it and destroys it when the grace ends."""
    manager, virt = manager_and_virt
    monkeypatch.setattr("launcher.manager.ACPI_RETRY_SECONDS", 0.05)
    virt.current = state
    await manager.graceful_stop(grace=0.2, clock=time.monotonic)
    assert virt.calls == ["destroy"]


async def test_shutdown_and_kill_of_a_guest_going_off_meanwhile(
    manager_and_virt: tuple[DomainManager, FakeVirt],
) -> None:
    """Shutdown and Kill report the domain off when it went off under them; a refusal
    while the guest still runs is still an error."""
    manager, virt = manager_and_virt
    virt.moves_first = DomainState.SHUTOFF
    for command in (manager.shutdown, manager.kill):
        virt.current = DomainState.RUNNING
        assert (await command()).state is DomainState.SHUTOFF
    virt.current = DomainState.RUNNING
    virt.moves_first = None

    async def refuse(name: str) -> None:
        raise LibvirtFailure("Requested operation is not valid: something else")

    virt.destroy = refuse  # type: ignore[method-assign]
    with pytest.raises(LibvirtFailure):
        await manager.kill()


async def test_events_become_domain_events(
    manager_and_virt: tuple[DomainManager, FakeVirt], published: list[DomainEvent]
) -> None:
    """Lifecycle and agent events are published with current state; other domains are ignored."""
    manager, virt = manager_and_virt
    virt.current = DomainState.RUNNING
    for event in (
        LifecycleEvent("default_tiny", "Defined"),
        LifecycleEvent("other_vm", "Started"),
        LifecycleEvent("default_tiny", "Agent", agent_connected=True),
        LifecycleEvent("default_tiny", "Undefined"),
    ):
        virt.events.put_nowait(event)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(manager.watch_events())
        async with asyncio.timeout(5):
            while len(published) < 3:  # noqa: ASYNC110 - polling a plain list the manager appends to
                await asyncio.sleep(0.01)
        task.cancel()
    assert [e.type for e in published] == [EventType.ADDED, EventType.MODIFIED, EventType.DELETED]
    assert published[1].domain.agent_connected is True


async def test_watchdog_expiries_are_counted_in_the_status(
    manager_and_virt: tuple[DomainManager, FakeVirt], published: list[DomainEvent]
) -> None:
    """libvirt's watchdog events (detail: the action) count up in the published status,
    with the last action as a word."""
    manager, virt = manager_and_virt
    virt.current = DomainState.RUNNING
    virt.events.put_nowait(LifecycleEvent("default_tiny", "Watchdog", 2))
    virt.events.put_nowait(LifecycleEvent("default_tiny", "Watchdog", 3))
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(manager.watch_events())
        async with asyncio.timeout(5):
            while len(published) < 2:  # noqa: ASYNC110 - polling a plain list the manager appends to
                await asyncio.sleep(0.01)
        task.cancel()
    assert [(e.domain.watchdog_fired, e.domain.watchdog_action) for e in published] == [
        (1, "reset"),
        (2, "poweroff"),
    ]


@pytest.mark.parametrize(
    ("start", "command", "target"),
    [
        pytest.param(DomainState.RUNNING, "pause", DomainState.PAUSED, id="pause"),
        pytest.param(DomainState.PAUSED, "unpause", DomainState.RUNNING, id="unpause"),
    ],
)
async def test_pause_and_unpause_are_idempotent(
    manager_and_virt: tuple[DomainManager, FakeVirt],
    start: DomainState,
    command: str,
    target: DomainState,
) -> None:
    """Pause of a paused domain and unpause of a running one answer as the first call did,
    without asking libvirt (which refuses one of the two)."""
    manager, virt = manager_and_virt
    virt.current = start
    first = await getattr(manager, command)()

    async def refuse(name: str) -> None:
        raise LibvirtFailure("Requested operation is not valid: domain is not paused")

    virt.suspend = virt.resume = refuse  # type: ignore[method-assign]
    assert await getattr(manager, command)() == first
    assert first.state is target


async def test_pause_refused_by_libvirt_is_an_error_unless_the_domain_got_there(
    manager_and_virt: tuple[DomainManager, FakeVirt],
) -> None:
    """A refusal while the domain stays where it was is an error; a refusal because it got
    paused meanwhile is success."""
    manager, virt = manager_and_virt
    virt.current = DomainState.RUNNING

    async def refuse(name: str) -> None:
        raise LibvirtFailure("Requested operation is not valid: domain is not running")

    virt.suspend = refuse  # type: ignore[method-assign]
    with pytest.raises(LibvirtFailure):
        await manager.pause()

    async def paused_meanwhile(name: str) -> None:
        virt.current = DomainState.PAUSED
        await refuse(name)

    virt.suspend = paused_meanwhile  # type: ignore[method-assign]
    assert (await manager.pause()).state is DomainState.PAUSED


async def test_agent_is_not_connected_once_the_domain_is_off(
    manager_and_virt: tuple[DomainManager, FakeVirt], published: list[DomainEvent]
) -> None:
    """agentConnected follows the agent's events while the domain runs, is false once it is
    off (no agent event comes when QEMU goes), and stays false for a later run until its
    own agent connects."""
    manager, virt = manager_and_virt
    virt.current = DomainState.RUNNING
    virt.events.put_nowait(LifecycleEvent("default_tiny", "Agent", agent_connected=True))
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(manager.watch_events())
        async with asyncio.timeout(5):
            while not published:  # noqa: ASYNC110 - polling a plain list the manager appends to
                await asyncio.sleep(0.01)
            assert published[0].domain.agent_connected is True
            virt.current = DomainState.SHUTOFF
            virt.events.put_nowait(LifecycleEvent("default_tiny", "Stopped"))
            while len(published) < 2:  # noqa: ASYNC110 - as above
                await asyncio.sleep(0.01)
        task.cancel()
    assert published[1].domain.agent_connected is False
    assert (await manager.status()).agent_connected is False
    virt.current = DomainState.RUNNING  # e.g. a migration arriving on this launcher
    assert (await manager.status()).agent_connected is False
