"""Lifecycle paths that end the guest: ACPI shutdown, kill, delete, SIGTERM, paused start."""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from shared.wire.domain import DomainEvent
from shared.wire.launcher_api import NOTIFY_METHOD, Method
from shared.wire.server import RpcServer, ServerInfo
from tests.integration.launcher.harness import (
    BOOT_MARKER,
    Launcher,
    call,
    domain_state,
    qemu_pids_under,
    tiny_vmi,
    wait_for,
)

pytestmark = pytest.mark.integration
Factory = Any


async def _boot(launcher: Launcher) -> None:
    await call(launcher, Method.SYNC, {"vmi": launcher.vmi})


async def test_acpi_shutdown_retried_while_booting(launchers: Factory) -> None:
    """ACPI shutdown sent from the first second on, re-sent until the guest powers off."""
    launcher = launchers()
    await _boot(launcher)

    async def off() -> bool:
        state, reason = await domain_state(launcher)
        if state == "Shutoff":
            return reason == "Shutdown"
        await call(launcher, Method.SHUTDOWN)
        return False

    await wait_for(off, timeout=90, interval=2, what="ACPI power-off", last=launcher.serial)
    assert BOOT_MARKER in launcher.serial()


async def test_kill_destroys(launchers: Factory) -> None:
    """Kill destroys the domain at once."""
    launcher = launchers()
    await _boot(launcher)
    status = await call(launcher, Method.KILL)
    assert (status["state"], status["reason"]) == ("Shutoff", "Destroyed")
    assert not qemu_pids_under(launcher.root)


async def test_delete_ends_the_launcher(launchers: Factory) -> None:
    """Delete destroys and undefines the domain, then the launcher exits 0 by itself."""
    launcher = launchers()
    await _boot(launcher)
    await call(launcher, Method.DELETE)
    assert launcher.process is not None
    code = await asyncio.to_thread(launcher.process.wait, 30)
    assert code == 0
    assert not qemu_pids_under(launcher.root)


async def test_sigterm_shuts_the_guest_down_gracefully(launchers: Factory) -> None:
    """SIGTERM → ACPI shutdown (re-sent while booting) → exit 0 with nothing left behind."""
    launcher = launchers(grace=60)
    await _boot(launcher)
    await wait_for(lambda: BOOT_MARKER in launcher.serial(), timeout=60, what="boot marker")
    code = await asyncio.to_thread(launcher.terminate, 90)
    assert code == 0, launcher.logs()
    assert "acpi_shutdown_sent" in launcher.logs()
    assert "grace_period_expired" not in launcher.logs()
    assert not qemu_pids_under(launcher.root)


async def test_guest_ignoring_acpi_is_destroyed_after_grace(launchers: Factory) -> None:
    """A guest that ignores ACPI is destroyed once the grace period ends; exit is still 0."""
    vmi = tiny_vmi()
    vmi["spec"]["domain"]["firmware"]["kernelBoot"]["kernelArgs"] += " kvpy.ignore_acpi=1"
    launcher = launchers(vmi, grace=4)
    await _boot(launcher)
    await wait_for(lambda: BOOT_MARKER in launcher.serial(), timeout=60, what="boot marker")
    code = await asyncio.to_thread(launcher.terminate, 60)
    assert code == 0
    assert "grace_period_expired" in launcher.logs()
    assert not qemu_pids_under(launcher.root)


async def test_start_strategy_paused(launchers: Factory) -> None:
    """startStrategy Paused starts the domain paused; unpause lets it run."""
    launcher = launchers(tiny_vmi(startStrategy="Paused"))
    status = await call(launcher, Method.SYNC, {"vmi": launcher.vmi})
    assert status["state"] == "Paused"
    assert (await call(launcher, Method.UNPAUSE))["state"] == "Running"


async def test_soft_reboot(launchers: Factory) -> None:
    """Soft reboot (ACPI) makes the guest boot a second time."""
    launcher = launchers()
    await _boot(launcher)
    await wait_for(lambda: "KUBEVIRT-PY-TICK 2" in launcher.serial(), timeout=60, what="ticks")

    async def rebooted() -> bool:
        if launcher.serial().count(BOOT_MARKER) >= 2:
            return True
        await call(launcher, Method.SOFT_REBOOT)
        return False

    await wait_for(rebooted, timeout=90, interval=3, what="second boot", last=launcher.serial)


async def test_events_reach_notify_socket_and_survive_reconnects(launchers: Factory) -> None:
    """Events arrive at the notify socket; when it restarts, later events still arrive."""
    events: list[DomainEvent] = []

    async def on_event(args: Any) -> None:
        events.append(DomainEvent.from_wire(args))

    with tempfile.TemporaryDirectory(prefix="kvn", dir="/tmp") as notify_dir:
        notify = Path(notify_dir) / "notify.sock"
        # It ends paused, and a paused guest cannot hear ACPI: the fixture's short grace
        # spares the teardown's wait for it (the launcher destroys the domain when it ends).
        launcher = launchers(notify_socket=notify)
        async with asyncio.TaskGroup() as tg:
            server = RpcServer(info=ServerInfo(server="test-handler"))
            server.register(NOTIFY_METHOD, on_event)
            serving = tg.create_task(server.serve(notify))
            await _boot(launcher)
            await wait_for(
                lambda: any(e.domain.state == "Running" for e in events),
                timeout=30, what="Running event", last=lambda: events,
            )  # fmt: skip
            serving.cancel()
            await asyncio.sleep(0.5)
            await call(launcher, Method.PAUSE)  # happens while nobody listens
            restarted = RpcServer(info=ServerInfo(server="test-handler"))
            restarted.register(NOTIFY_METHOD, on_event)
            serving = tg.create_task(restarted.serve(notify))
            await wait_for(
                lambda: any(e.domain.state == "Paused" for e in events),
                timeout=30, what="Paused event after reconnect", last=lambda: events,
            )  # fmt: skip
            serving.cancel()


async def test_empty_and_host_disks_are_attached(launchers: Factory) -> None:
    """emptyDisk makes a qcow2 and hostDisk DiskOrCreate a sparse file in the directory
    the pod mounts from the node (vmi-disks/<volume>); both reach the guest."""
    vmi = tiny_vmi()
    spec = vmi["spec"]
    spec["domain"]["devices"]["disks"] += [
        {"name": "scratch", "disk": {"bus": "virtio"}},
        {"name": "data", "disk": {"bus": "sata"}},
    ]
    launcher = launchers(vmi)
    mount = launcher.private / "vmi-disks" / "data"  # what the pod's hostPath volume is
    mount.mkdir(parents=True)
    host_path = mount / "data.img"
    spec["volumes"] += [
        {"name": "scratch", "emptyDisk": {"capacity": "64Mi"}},
        {
            "name": "data",
            "hostDisk": {"path": "/var/data/data.img", "type": "DiskOrCreate", "capacity": "32Mi"},
        },
    ]
    await _boot(launcher)
    assert host_path.stat().st_size == 32 * 1024 * 1024
    out = subprocess.run(
        ["virsh", "-c", launcher.libvirt_uri, "domblklist", "default_tiny"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "scratch-empty.qcow2" in out
    assert str(host_path) in out
    stats = await call(launcher, Method.GET_DOMAIN_STATS)
    # labelled with the VMI's disk names (KubeVirt's `drive` label), not libvirt's vda/sdb
    assert {b["name"] for b in stats["block"]} == {"containerdisk", "cloudinit", "scratch", "data"}
