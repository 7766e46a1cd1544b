"""The handler driving real launchers and the real guest, as a node of its own on the
session cluster (the test plays the controller: tests/integration/handler/node.py).

Each test boots the tiny guest under TCG through a real launcher; at most two guests run
at once (2 cores).
"""

from __future__ import annotations

import aiohttp
import pytest
from structlog.testing import capture_logs

from shared.model import ConditionStatus, VMIConditionType, VMIPhase
from shared.wire.domain import DomainState
from shared.wire.launcher_api import Method
from tests.integration.handler.node import BOOT_TIMEOUT, USER_DATA, Node, events
from tests.integration.launcher.harness import BOOT_MARKER, TICK, call, qemu_pids_under
from tests.unit.handler.waiting import until, until_async

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def _condition(node: Node, key: str, type_: str) -> ConditionStatus | None:
    cond = node.vmi(key).status.condition(type_)
    return None if cond is None else cond.status


async def _scrape(node: Node) -> str:
    assert node.handler is not None
    url = f"http://127.0.0.1:{node.handler.http.bound_port}/metrics"
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert resp.status == 200
        return await resp.text()


def _sample(text: str, name: str, vmi: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + "{") and f'name="{vmi}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} series for {vmi} in:\n{text[:3000]}")


async def test_guest_boots_to_running_with_console_agent_metrics_and_pause(node: Node) -> None:
    """Scheduled → Running in the first status write; the console shows the boot marker and
    the cloud-init user-data; the agent brings AgentConnected and guestOSInfo; /metrics
    has the guest's counters; pausing and resuming the domain shows in the conditions."""
    key = await node.add_vmi(name="story")
    await node.wait_phase(key, VMIPhase.RUNNING)
    history = node.history(key)
    assert history[0]["phase"] == "Running"
    assert _condition(node, key, VMIConditionType.READY) is ConditionStatus.TRUE
    await node.wait_console(key, BOOT_MARKER)
    await node.wait_console(key, USER_DATA)
    await until(
        lambda: node.vmi(key).status.guest_os_info is not None,
        "guestOSInfo from the agent",
        BOOT_TIMEOUT,
    )
    assert _condition(node, key, VMIConditionType.AGENT_CONNECTED) is ConditionStatus.TRUE
    assert len(node.history(key)) <= 3  # Running, then agent + OS info (maybe split)
    metrics = await _scrape(node)
    assert _sample(metrics, "kubevirt_vmi_cpu_usage_seconds_total", "story") > 0
    assert _sample(metrics, "kubevirt_vmi_memory_domain_bytes", "story") == 128 * 1024 * 1024
    assert f'kubevirt_virt_handler_ready_status{{node="{node.name}"}} 1' in metrics

    launcher = node.launchers[key]
    await call(launcher, Method.PAUSE)
    await until(
        lambda: _condition(node, key, VMIConditionType.PAUSED) is ConditionStatus.TRUE,
        "Paused condition",
        30,
    )
    assert _condition(node, key, VMIConditionType.READY) is ConditionStatus.FALSE
    await call(launcher, Method.UNPAUSE)
    await until(
        lambda: _condition(node, key, VMIConditionType.READY) is ConditionStatus.TRUE,
        "Ready again",
        30,
    )
    assert _condition(node, key, VMIConditionType.PAUSED) is None


async def test_deleted_vmi_powers_off_through_acpi_within_grace(node: Node) -> None:
    """Deleted right after it started (a booting guest misses ACPI, so the handler repeats
    it): the guest powers itself off before the grace ends, the VMI Succeeded, the
    launcher was told to delete its domain and exited cleanly."""
    key = await node.add_vmi(name="acpi", grace=60)
    await node.wait_phase(key, VMIPhase.RUNNING)
    with capture_logs() as captured:
        await node.delete_vmi(key)
        await node.wait_phase(key, VMIPhase.SUCCEEDED, timeout=90)
    assert events(captured, "acpi_shutdown_sent")
    assert events(captured, "grace_period_expired") == []
    assert "reboot: Power down" in node.launchers[key].serial()  # the guest's own poweroff
    launcher = node.launchers[key]
    assert launcher.process is not None
    await until(
        lambda: launcher.process is not None and launcher.process.poll() is not None,
        "launcher exit",
        60,
    )
    assert launcher.process.returncode == 0
    assert qemu_pids_under(launcher.root) == []


async def test_guest_ignoring_acpi_is_killed_when_the_grace_period_ends(node: Node) -> None:
    """A guest booted with kvpy.ignore_acpi=1: ACPI is re-sent during the grace period, then
    the domain is killed — not before the grace ends — and the VMI Succeeded."""
    key = await node.add_vmi(name="stubborn", grace=6, kernel_args="kvpy.ignore_acpi=1")
    await node.wait_phase(key, VMIPhase.RUNNING)
    await node.wait_console(key, BOOT_MARKER)
    with capture_logs() as captured:
        await node.delete_vmi(key)
        await node.wait_phase(key, VMIPhase.SUCCEEDED, timeout=90)
    acpi = events(captured, "acpi_shutdown_sent")
    kills = events(captured, "grace_period_expired")
    assert len(acpi) >= 2
    assert len(kills) == 1 and kills[0]["overdue"] >= 0
    assert captured.index(kills[0]) > captured.index(acpi[-1])
    assert "Power down" not in node.launchers[key].serial()


async def test_launcher_killed_with_sigkill_fails_the_vmi(node: Node) -> None:
    """The launcher process dies (SIGKILL): its socket refuses connections, VMI Failed."""
    key = await node.add_vmi(name="doomed")
    await node.wait_phase(key, VMIPhase.RUNNING)
    node.launchers[key].sigkill()
    await node.wait_phase(key, VMIPhase.FAILED, timeout=60)
    vmi = node.vmi(key)
    assert vmi.status.reason == "LauncherDied"
    assert _condition(node, key, VMIConditionType.READY) is ConditionStatus.FALSE


async def test_handler_crash_and_restart_loses_no_guest_and_reconverges(node: Node) -> None:
    """Two running guests; the handler dies mid-flight; meanwhile one guest is powered off.
    After the restart the other guest is the same QEMU, still ticking, its status
    untouched; the powered-off one is seen and Succeeded."""
    keep = await node.add_vmi(name="keep")
    stop = await node.add_vmi(name="stop")
    await node.wait_phase(keep, VMIPhase.RUNNING)
    await node.wait_phase(stop, VMIPhase.RUNNING)
    await node.wait_console(keep, f"{TICK} 2")
    await node.wait_console(stop, BOOT_MARKER)
    qemu = qemu_pids_under(node.launchers[keep].root)
    writes = len(node.history(keep))

    await node.stop_handler(crash=True)
    stopping = node.launchers[stop]

    async def powered_off() -> bool:
        await call(stopping, Method.SHUTDOWN)
        status = await call(stopping, Method.GET_DOMAIN)
        return bool(status["state"] == DomainState.SHUTOFF)

    await until_async(powered_off, "guest powered off while the handler is down")
    ticks = node.launchers[keep].serial().count(TICK)

    await node.start_handler()
    await node.wait_phase(stop, VMIPhase.SUCCEEDED, timeout=60)
    await until(lambda: node.launchers[keep].serial().count(TICK) > ticks + 2, "keep ticking", 60)
    assert qemu_pids_under(node.launchers[keep].root) == qemu
    assert node.vmi(keep).status.phase is VMIPhase.RUNNING
    assert len(node.history(keep)) == writes
