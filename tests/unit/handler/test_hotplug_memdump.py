"""The handler's half of a memory dump: an AttachedToNode memoryDump volume gets its dump
file on the claim, bind-mounted into the launcher pod (MemoryDumpInProgress, KubeVirt's
file name); memory_dump is asked until it ended (Completed or Failed with the launcher's
reason); a removed one is only unmounted (the guest never had it)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from handler.hotplug import HotplugOptions, HotplugVolumes
from handler.launchers import LauncherState
from shared import podlayout
from shared.model import VirtualMachineInstance
from shared.wire.launcher_api import Method
from tests.unit.handler.test_hotplug import PV_DIR, FakeMounts

NOW = datetime(2026, 11, 29, 14, 5, 6, tzinfo=UTC)
FILE = "vm-dump-20261129-140506.memory.dump"


class DumpLauncher:
    """Answers memory_dump with `state` (and `reason`) for whatever file is asked."""

    state = LauncherState.CONNECTED
    since = 0.0

    def __init__(self, state: str = "InProgress", reason: str | None = None) -> None:
        self.dump_state, self.reason = state, reason
        self.calls: list[tuple[Method, Mapping[str, Any] | None]] = []

    async def call(self, method: Method, args: Mapping[str, Any] | None = None) -> Any:
        self.calls.append((method, args))
        assert method is Method.MEMORY_DUMP and args is not None
        return {"fileName": args["fileName"], "state": self.dump_state,
                "startTimestamp": "2026-11-29T14:05:06Z",
                "endTimestamp": None if self.dump_state == "InProgress" else "2026-11-29T14:05:09Z",
                "reason": self.reason}  # fmt: skip


def _vmi(*, in_spec: bool, phase: str, file: str | None = None) -> VirtualMachineInstance:
    entry: dict[str, Any] = {
        "name": "dump",
        "phase": phase,
        "hotplugVolume": {"attachPodName": "hp-volume-x", "attachPodUID": "attach-uid"},
        "memoryDumpVolume": {"claimName": "dump", **({"targetFileName": file} if file else {})},
    }
    volume = {"name": "dump", "memoryDump": {"claimName": "dump", "hotpluggable": True}}
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "vm", "namespace": "ns", "uid": "vmi-uid"},
        "spec": {"volumes": [volume] if in_spec else []},
        "status": {"phase": "Running", "volumeStatus": [entry]},
    })  # fmt: skip


def _rig(tmp_path: Path) -> tuple[HotplugVolumes, FakeMounts]:
    (tmp_path / "attach-uid" / PV_DIR).mkdir(parents=True)
    mounts = FakeMounts()
    hotplug = HotplugVolumes(
        pods_dir=tmp_path, mounts=mounts, options=HotplugOptions(), wall=lambda: NOW
    )
    return hotplug, mounts


def _target(tmp_path: Path) -> Path:
    return tmp_path / podlayout.hotplug_disks_on_node("pod-uid") / "dump.img"


async def test_an_attached_dump_volume_gets_its_file_and_the_dump_starts(tmp_path: Path) -> None:
    """Older dumps on the claim go, the new file (KubeVirt's name) is made and mounted as the
    volume's file in the launcher pod; memory_dump is asked for it; InProgress, revisited."""
    hotplug, mounts = _rig(tmp_path)
    claim = tmp_path / "attach-uid" / PV_DIR
    (claim / "vm-dump-20250101-000000.memory.dump").write_bytes(b"old")
    launcher = DumpLauncher()
    out = await hotplug.sync(
        _vmi(in_spec=True, phase="AttachedToNode"), launcher, pod_uid="pod-uid"
    )
    (entry,) = out.volume_status
    assert entry.phase == "MemoryDumpInProgress"
    assert entry.memory_dump_volume is not None
    assert entry.memory_dump_volume.target_file_name == FILE
    assert entry.memory_dump_volume.start_timestamp == "2026-11-29T14:05:06Z"
    assert sorted(p.name for p in claim.iterdir()) == [FILE]
    assert mounts.mounted == {_target(tmp_path): claim / FILE}
    assert launcher.calls == [(Method.MEMORY_DUMP, {"volume": "dump", "fileName": FILE})]
    assert out.revisit == 2.0


async def test_a_completed_dump_is_reported_with_its_times(tmp_path: Path) -> None:
    """The launcher's Completed: MemoryDumpCompleted, its end time, KubeVirt's message."""
    hotplug, _ = _rig(tmp_path)
    vmi = _vmi(in_spec=True, phase="MemoryDumpInProgress", file=FILE)
    out = await hotplug.sync(vmi, DumpLauncher("Completed"), pod_uid="pod-uid")
    (entry,) = out.volume_status
    assert entry.phase == "MemoryDumpCompleted"
    assert entry.message == "Memory dump to Volume dump has completed successfully"
    assert entry.memory_dump_volume is not None
    assert entry.memory_dump_volume.end_timestamp == "2026-11-29T14:05:09Z"
    assert out.revisit is None


async def test_a_failed_dump_names_the_launchers_reason(tmp_path: Path) -> None:
    """The launcher's Failed: MemoryDumpFailed, the message naming the claim and why."""
    hotplug, _ = _rig(tmp_path)
    vmi = _vmi(in_spec=True, phase="MemoryDumpInProgress", file=FILE)
    launcher = DumpLauncher("Failed", "Domain memory dump failed: no space left on device")
    out = await hotplug.sync(vmi, launcher, pod_uid="pod-uid")
    (entry,) = out.volume_status
    assert entry.phase == "MemoryDumpFailed"
    assert entry.message == (
        "Memory dump to pvc dump failed: Domain memory dump failed: no space left on device"
    )


async def test_a_removed_dump_volume_is_only_unmounted(tmp_path: Path) -> None:
    """Gone from the spec once the dump ended: unmounted and dropped, no launcher call."""
    hotplug, mounts = _rig(tmp_path)
    mounts.mounted[_target(tmp_path)] = tmp_path / "x"
    launcher = DumpLauncher()
    out = await hotplug.sync(
        _vmi(in_spec=False, phase="MemoryDumpCompleted", file=FILE), launcher, pod_uid="pod-uid"
    )
    assert out.volume_status == () and mounts.mounted == {} and launcher.calls == []
