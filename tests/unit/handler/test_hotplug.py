"""The handler's hotplug mounter: an AttachedToNode volume is bind-mounted into the
launcher pod and attached (Ready); a removed one is detached, unmounted and dropped, and
a guest that never lets go is given up on after the deadline (reported), never stuck."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from handler.hotplug import HotplugOptions, HotplugVolumes
from handler.launchers import LauncherState
from shared import podlayout
from shared.model import VirtualMachineInstance
from shared.wire.launcher_api import Method

PV_DIR = "volumes/kubernetes.io~local-volume/local-node1-0"


class FakeMounts:
    def __init__(self) -> None:
        self.mounted: dict[Path, Path] = {}

    def bind(self, source: Path, target: Path) -> None:
        self.mounted[target] = source

    def unmount(self, target: Path) -> None:
        self.mounted.pop(target, None)

    def is_mounted(self, target: Path) -> bool:
        return target in self.mounted


class FakeLauncher:
    """Answers attach/detach; `holds` is what the domain has attached."""

    state = LauncherState.CONNECTED
    since = 0.0

    def __init__(self, *, stubborn: bool = False) -> None:
        self.holds: dict[str, str] = {}
        self.stubborn = stubborn
        self.calls: list[tuple[Method, Mapping[str, Any] | None]] = []

    async def call(self, method: Method, args: Mapping[str, Any] | None = None) -> Any:
        self.calls.append((method, args))
        assert args is not None
        volume = str(args["volume"])
        if method is Method.ATTACH_VOLUME:
            self.holds[volume] = "sda"
            return {"target": "sda", "attached": True}
        target = self.holds.get(volume)
        if not self.stubborn:
            self.holds.pop(volume, None)
        return {"target": target, "attached": volume in self.holds}


def _vmi(*, in_spec: bool, phase: str) -> VirtualMachineInstance:
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "c", "hotpluggable": True}}
    entry = {
        "name": "data",
        "phase": phase,
        "hotplugVolume": {"attachPodName": "hp-volume-x", "attachPodUID": "attach-uid"},
        "persistentVolumeClaimInfo": {"capacity": {"storage": "1Mi"}},
    }
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "vm", "namespace": "ns", "uid": "vmi-uid"},
        "spec": {
            "domain": {"devices": {"disks": [{"name": "data", "disk": {"bus": "scsi"}}] if in_spec else []}},
            "volumes": [volume] if in_spec else [],
        },
        "status": {"phase": "Running", "volumeStatus": [entry]},
    })  # fmt: skip


def _rig(tmp_path: Path, **options: Any) -> tuple[HotplugVolumes, FakeMounts, list[float]]:
    (tmp_path / "attach-uid" / PV_DIR).mkdir(parents=True)
    (tmp_path / "attach-uid" / "volumes/kubernetes.io~empty-dir/x").mkdir(parents=True)
    mounts, now = FakeMounts(), [0.0]
    hotplug = HotplugVolumes(
        pods_dir=tmp_path, mounts=mounts, options=HotplugOptions(**options), clock=lambda: now[0]
    )
    return hotplug, mounts, now


def _target(tmp_path: Path) -> Path:
    return tmp_path / podlayout.hotplug_disks_on_node("pod-uid") / "data.img"


async def test_attached_to_node_becomes_ready(tmp_path: Path) -> None:
    """The claim's disk.img is made to its capacity in the attachment pod's volume,
    bind-mounted as hotplug-disks/data.img of the launcher pod, attached on its bus:
    phase Ready, target sda, KubeVirt's reason and message."""
    hotplug, mounts, _ = _rig(tmp_path)
    launcher = FakeLauncher()
    out = await hotplug.sync(
        _vmi(in_spec=True, phase="AttachedToNode"), launcher, pod_uid="pod-uid"
    )
    (entry,) = out.volume_status
    assert (entry.phase, entry.target, entry.reason) == ("Ready", "sda", "VolumeReady")
    assert entry.message == "Successfully attach hotplugged volume data to VM"
    disk = tmp_path / "attach-uid" / PV_DIR / "disk.img"
    assert disk.stat().st_size == 1024 * 1024
    assert mounts.mounted == {_target(tmp_path): disk}
    ((method, args),) = launcher.calls
    assert (method, args) == (
        Method.ATTACH_VOLUME,
        {"volume": "data", "bus": "scsi", "readonly": False},
    )
    assert out.revisit is None


async def test_a_claim_not_on_the_node_is_reported_and_retried(tmp_path: Path) -> None:
    """No claim dir under the attachment pod: VolumeMountFailed naming the claim, phase
    unchanged, looked at again; nothing attached."""
    hotplug, mounts, _ = _rig(tmp_path)
    (tmp_path / "attach-uid" / PV_DIR).rmdir()
    launcher = FakeLauncher()
    out = await hotplug.sync(
        _vmi(in_spec=True, phase="AttachedToNode"), launcher, pod_uid="pod-uid"
    )
    (entry,) = out.volume_status
    assert (entry.phase, entry.reason) == ("AttachedToNode", "VolumeMountFailed")
    assert "claim 'c' is not mounted" in (entry.message or "")
    assert out.revisit == 2.0 and launcher.calls == [] and mounts.mounted == {}


async def test_removed_volume_is_detached_unmounted_and_dropped(tmp_path: Path) -> None:
    """Removed from the spec while Ready: detach_volume, the guest lets go, the mount is
    undone and the entry dropped (the controller then deletes the attachment pod)."""
    hotplug, mounts, _ = _rig(tmp_path)
    launcher = FakeLauncher()
    await hotplug.sync(_vmi(in_spec=True, phase="AttachedToNode"), launcher, pod_uid="pod-uid")
    out = await hotplug.sync(_vmi(in_spec=False, phase="Ready"), launcher, pod_uid="pod-uid")
    assert out.volume_status == () and out.forced == []
    assert mounts.mounted == {}
    assert launcher.calls[-1] == (Method.DETACH_VOLUME, {"volume": "data"})


async def test_a_guest_that_ignores_the_unplug_is_given_up_on(tmp_path: Path) -> None:
    """The guest keeps the disk: Detaching with why, retried; past the deadline the mount
    is undone anyway, the entry dropped and the volume reported as forced."""
    hotplug, mounts, now = _rig(tmp_path, detach_deadline=30.0)
    launcher = FakeLauncher(stubborn=True)
    await hotplug.sync(_vmi(in_spec=True, phase="AttachedToNode"), launcher, pod_uid="pod-uid")
    removed = _vmi(in_spec=False, phase="Ready")
    waiting = await hotplug.sync(removed, launcher, pod_uid="pod-uid")
    (entry,) = waiting.volume_status
    assert (entry.phase, entry.reason) == ("Detaching", "VolumeDetaching")
    assert entry.message == "the guest did not release sda"
    assert waiting.revisit == 2.0 and mounts.mounted
    now[0] = 31.0
    forced = await hotplug.sync(removed, launcher, pod_uid="pod-uid")
    assert forced.volume_status == () and mounts.mounted == {}
    assert forced.forced == [("data", "the guest did not release sda")]


async def test_release_undoes_every_mount_of_the_pod(tmp_path: Path) -> None:
    """The VMI ended (or was deleted): its launcher pod's hotplug mounts are undone, so
    the kubelet can remove the pod's directory."""
    hotplug, mounts, _ = _rig(tmp_path)
    await hotplug.sync(
        _vmi(in_spec=True, phase="AttachedToNode"), FakeLauncher(), pod_uid="pod-uid"
    )
    _target(tmp_path).parent.mkdir(parents=True)
    _target(tmp_path).touch()
    hotplug.release("vmi-uid", "pod-uid")
    assert mounts.mounted == {}


async def test_a_cdroms_media_are_attached_without_its_sata_bus(tmp_path: Path) -> None:
    """The hotplugged volume of a declared sata cdrom is mounted and attached like a disk;
    the wire's bus is the default one (the launcher inserts the media into the device the
    domain has; sata is no bus a disk is hot-plugged on)."""
    hotplug, _, _ = _rig(tmp_path)
    launcher = FakeLauncher()
    raw = _vmi(in_spec=True, phase="AttachedToNode").to_dict()
    raw["spec"]["domain"]["devices"]["disks"] = [{"name": "data", "cdrom": {"bus": "sata"}}]
    out = await hotplug.sync(VirtualMachineInstance.from_dict(raw), launcher, pod_uid="pod-uid")
    assert out.volume_status[0].phase == "Ready"
    ((_, args),) = launcher.calls
    assert args == {"volume": "data", "bus": "scsi", "readonly": False}
