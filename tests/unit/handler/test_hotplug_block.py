"""Hotplugged Block claims on the handler: the device the kubelet mapped for the attachment
pod is found, given to the launcher (a node of the same device number, owned by its user)
after the device is allowed in the launcher container's cgroup and every cgroup below it;
then attached as for a filesystem claim. A launcher in no cgroup v1 devices controller is
refused with why."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from handler.errors import HandlerError
from handler.hotplug import HotplugVolumes, block
from handler.netns import Launcher
from shared.model import VirtualMachineInstance
from shared.wire.launcher_api import Method
from tests.unit.handler.test_hotplug import FakeLauncher, FakeMounts, _target

LOOP = os.makedev(7, 42)


def _vmi() -> VirtualMachineInstance:
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "c", "hotpluggable": True}}
    entry = {
        "name": "data",
        "phase": "AttachedToNode",
        "hotplugVolume": {"attachPodName": "hp-volume-x", "attachPodUID": "attach-uid"},
        "persistentVolumeClaimInfo": {"volumeMode": "Block", "capacity": {"storage": "1Mi"}},
    }
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "vm", "namespace": "ns", "uid": "vmi-uid"},
        "spec": {"domain": {"devices": {"disks": [{"name": "data", "disk": {"bus": "virtio"}}]}},
                 "volumes": [volume]},
        "status": {"phase": "Running", "volumeStatus": [entry]},
    })  # fmt: skip


def _mapped(tmp_path: Path) -> Path:
    where = tmp_path / "attach-uid" / "volumeDevices" / "kubernetes.io~csi"
    where.mkdir(parents=True)
    os.mknod(where / "pvc-1", stat.S_IFBLK | 0o600, LOOP)
    return where / "pvc-1"


async def test_a_block_claim_is_given_as_a_device_and_attached(tmp_path: Path) -> None:
    """The mapped device reaches give_device with the launcher of the pod's socket; no bind
    mount; the launcher attaches it; Ready."""
    device = _mapped(tmp_path)
    given: list[tuple[Path, Path, Launcher]] = []
    sockets: list[Path] = []

    def launcher_of(socket: Path) -> Launcher:
        sockets.append(socket)
        return Launcher(pid=4242, uid=107)

    mounts = FakeMounts()
    hotplug = HotplugVolumes(
        pods_dir=tmp_path,
        mounts=mounts,
        give_device=lambda s, t, lnch: given.append((s, t, lnch)),
        launcher_of=launcher_of,
    )
    launcher = FakeLauncher()
    out = await hotplug.sync(_vmi(), launcher, pod_uid="pod-uid")
    (entry,) = out.volume_status
    assert entry.phase == "Ready"
    assert given == [(device, _target(tmp_path), Launcher(pid=4242, uid=107))]
    assert sockets[0].is_relative_to(tmp_path / "pod-uid")
    assert mounts.mounted == {}
    assert launcher.calls[0][0] is Method.ATTACH_VOLUME


def test_the_device_is_allowed_below_the_container_then_made(tmp_path: Path) -> None:
    """`b 7:42 rwm` lands in devices.allow of the launcher's cgroup and each one below it
    (libvirt's); the node is made with the device number, owned by the launcher's user."""
    proc, devices = tmp_path / "proc", tmp_path / "devices"
    (proc / "4242").mkdir(parents=True)
    (proc / "4242" / "cgroup").write_text("7:memory:/kp/pod1/c1\n5:devices:/kp/pod1/c1\n")
    top = devices / "kp" / "pod1" / "c1"
    (top / "machine" / "qemu-1").mkdir(parents=True)
    for d in (top, top / "machine", top / "machine" / "qemu-1"):
        (d / "devices.allow").write_text("")
    block.allow_device(4242, LOOP, devices=devices, proc=proc)
    for d in (top, top / "machine", top / "machine" / "qemu-1"):
        assert (d / "devices.allow").read_text() == "b 7:42 rwm"
    with pytest.raises(HandlerError, match="cgroup v1 devices"):
        (proc / "4242" / "cgroup").write_text("0::/kp/pod1/c1\n")
        block.allow_device(4242, LOOP, devices=devices, proc=proc)


def test_device_source_needs_one_block_device(tmp_path: Path) -> None:
    """Nothing mapped, or a regular file there: DeviceNotMapped naming the volume."""
    entry = _vmi().status.volume_status[0]
    with pytest.raises(block.DeviceNotMapped, match="no one block device"):
        block.device_source(entry, pods_dir=tmp_path)
    device = _mapped(tmp_path)
    assert block.device_source(entry, pods_dir=tmp_path) == device
    device.unlink()
    device.write_text("not a device")
    with pytest.raises(block.DeviceNotMapped, match="is no block device"):
        block.device_source(entry, pods_dir=tmp_path)


def test_the_devices_hierarchy_is_mounted_once(tmp_path: Path) -> None:
    """Mounted at the given directory (its root has devices.allow); a second call finds it
    mounted and mounts nothing more."""
    at = tmp_path / "devices"
    try:
        assert block.devices_hierarchy(at) == at
        assert (at / "devices.allow").is_file()
        assert block.devices_hierarchy(at) == at
        mounts = Path("/proc/self/mountinfo").read_text()
        assert mounts.count(f" {at} ") == 1
    finally:
        while f" {at} " in Path("/proc/self/mountinfo").read_text():
            subprocess.run(["umount", str(at)], check=True)
