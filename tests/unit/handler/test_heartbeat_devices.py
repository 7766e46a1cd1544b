"""Node heartbeat (handler.heartbeat) and device checks (handler.devices)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from handler.devices import DeviceState, check_device, check_devices, devices_ready
from handler.heartbeat import Heartbeat
from shared.kube import ServerError
from shared.labels import HEARTBEAT_ANNOTATION, SCHEDULABLE_LABEL
from tests.unit.handler.fakes import FakeApi
from tests.unit.handler.waiting import until

WALL = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


async def test_beat_patches_label_and_annotation() -> None:
    """schedulable label as "true"/"false" and the heartbeat as RFC 3339."""
    api = FakeApi()
    beat = Heartbeat(
        api, node="node01", interval=60, jitter=0.2, schedulable=lambda: True, wall=lambda: WALL
    )
    await beat.beat(schedulable=False)
    assert api.nodes["node01"]["metadata"] == {
        "labels": {SCHEDULABLE_LABEL: "false"},
        "annotations": {HEARTBEAT_ANNOTATION: "2026-01-01T12:00:00Z"},
    }


@pytest.mark.parametrize(("rand", "delay"), [(0.0, 48.0), (0.5, 60.0), (1.0, 72.0)])
def test_interval_has_jitter(rand: float, delay: float) -> None:
    """±jitter around the interval, so handlers do not beat in lockstep."""
    beat = Heartbeat(
        FakeApi(), node="n", interval=60, jitter=0.2, schedulable=lambda: True, rand=lambda: rand
    )
    assert beat.next_delay() == pytest.approx(delay)


class FlakyApi(FakeApi):
    def __init__(self) -> None:
        super().__init__()
        self.fail_node_patch = True

    async def patch_node(self, name: str, patch: Mapping[str, Any]) -> None:
        if self.fail_node_patch:
            self.fail_node_patch = False
            raise ServerError(500, "InternalError", "etcd leader changed")
        await super().patch_node(name, patch)


async def test_run_survives_failures_and_beats_at_once_when_poked() -> None:
    """A failed beat is retried; a readiness change is published without waiting."""
    api = FlakyApi()
    ready = False
    beat = Heartbeat(api, node="n", interval=0.01, jitter=0, schedulable=lambda: ready)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(beat.run())
        await until(lambda: beat.beats > 0, "first beat")
        beat._interval = 3600  # only a poke can bring the next beat now
        await asyncio.sleep(0.05)
        ready = True
        beat.poke()
        await until(lambda: beat.last is True, "beat after the poke")
        task.cancel()
    assert api.nodes["n"]["metadata"]["labels"][SCHEDULABLE_LABEL] == "true"


def test_device_checks_say_what_is_wrong(tmp_path: Path) -> None:
    """Missing, not a character device, or not accessible: each with a clear message."""
    missing = check_device(tmp_path / "kvm", required=False)
    assert missing.state is DeviceState.MISSING and "TCG" in missing.message
    plain = tmp_path / "tun"
    plain.write_text("")
    assert check_device(plain, required=True).state is DeviceState.NOT_A_DEVICE
    denied = check_device(Path("/dev/null"), required=True, access=lambda _: False)
    assert denied.state is DeviceState.NO_ACCESS
    assert f"uid {os.getuid()}" in denied.message and "permissions" in denied.message
    assert check_device(Path("/dev/null"), required=True).ok


def test_only_required_devices_gate_schedulability(tmp_path: Path) -> None:
    """A missing optional device degrades; a broken required one blocks scheduling."""
    checks = check_devices([Path("/dev/null"), tmp_path / "kvm"], required=[Path("/dev/null")])
    assert devices_ready(checks)
    checks = check_devices([Path("/dev/null"), tmp_path / "kvm"], required=[tmp_path / "kvm"])
    assert not devices_ready(checks)
