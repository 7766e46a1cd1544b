"""The launcher's hotplug: attach picks the bus's next free device and is idempotent;
detach reports whether the domain still holds the disk, also when the guest ignores it."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from launcher.errors import DiskFailure
from launcher.hotplug import Hotplug, HotplugConfig
from shared.wire.errors import InvalidArgument
from shared.wire.launcher_api import AttachVolumeArgs, DetachVolumeArgs

DOMAIN = """<domain><name>ns_vm</name><devices>
<disk type="file" device="disk"><target dev="vda" bus="virtio"/><alias name="ua-boot"/></disk>
<disk type="file" device="disk"><target dev="sda" bus="scsi"/><alias name="ua-other"/></disk>
</devices></domain>"""


class FakeVirt:
    """A live domain XML that attach/detach change; `stubborn` ignores detaches."""

    def __init__(self, *, stubborn: bool = False) -> None:
        self.root = ET.fromstring(DOMAIN)
        self.stubborn = stubborn
        self.attached: list[str] = []
        self.detached: list[str] = []

    async def xml(self, name: str) -> str:
        assert name == "ns_vm"
        return ET.tostring(self.root, encoding="unicode")

    async def attach_device(self, name: str, xml: str) -> None:
        self.attached.append(xml)
        devices = self.root.find("devices")
        assert devices is not None
        devices.append(ET.fromstring(xml))

    async def update_device(self, name: str, xml: str) -> None:
        raise AssertionError("disks are attached and detached, never updated")

    async def detach_device(self, name: str, xml: str) -> None:
        self.detached.append(xml)
        if self.stubborn:
            return
        devices = self.root.find("devices")
        assert devices is not None
        alias = ET.fromstring(xml).find("alias")
        assert alias is not None
        for disk in devices.findall("disk"):
            found = disk.find("alias")
            if found is not None and found.get("name") == alias.get("name"):
                devices.remove(disk)


def _hotplug(virt: FakeVirt, tmp_path: Path) -> Hotplug:
    (tmp_path / "data.img").write_bytes(b"")
    config = HotplugConfig(disks_dir=tmp_path, detach_wait=0.05, poll=0.01)
    return Hotplug(virt=virt, domain=lambda: "ns_vm", config=config)


async def test_attach_takes_the_next_free_name_once(tmp_path: Path) -> None:
    """scsi after sda is sdb, virtio after vda is vdb; attaching again answers the same
    device without a second attach. The disk is the hotplug-disks file, raw, aliased."""
    virt = FakeVirt()
    hotplug = _hotplug(virt, tmp_path)
    reply = await hotplug.attach(AttachVolumeArgs(volume="data", bus="scsi", serial="s1"))
    assert (reply.target, reply.attached) == ("sdb", True)
    again = await hotplug.attach(AttachVolumeArgs(volume="data", bus="scsi"))
    assert again.target == "sdb"
    (xml,) = virt.attached
    disk = ET.fromstring(xml)
    assert disk.find("source").get("file") == str(tmp_path / "data.img")  # type: ignore[union-attr]
    assert disk.find("driver").get("type") == "raw"  # type: ignore[union-attr]
    assert disk.find("alias").get("name") == "ua-data"  # type: ignore[union-attr]
    assert disk.findtext("serial") == "s1"
    (tmp_path / "more.img").write_bytes(b"")
    assert (await hotplug.attach(AttachVolumeArgs(volume="more", bus="virtio"))).target == "vdb"


async def test_attach_without_the_disk_file_is_refused(tmp_path: Path) -> None:
    """The handler has not mounted the disk: DiskFailure naming the volume and path."""
    hotplug = _hotplug(FakeVirt(), tmp_path)
    with pytest.raises(DiskFailure, match=r"hotplugged volume 'nope': .*nope\.img is not there"):
        await hotplug.attach(AttachVolumeArgs(volume="nope"))


async def test_detach_reports_gone_or_still_held(tmp_path: Path) -> None:
    """A guest that lets go: attached False with the old target; a volume never attached:
    attached False at once; a guest that ignores the unplug: attached True after the wait."""
    virt = FakeVirt()
    hotplug = _hotplug(virt, tmp_path)
    await hotplug.attach(AttachVolumeArgs(volume="data"))
    gone = await hotplug.detach(DetachVolumeArgs(volume="data"))
    assert (gone.target, gone.attached) == ("sdb", False)
    never = await hotplug.detach(DetachVolumeArgs(volume="data"))
    assert (never.target, never.attached) == (None, False)
    stubborn = FakeVirt(stubborn=True)
    held = await _hotplug(stubborn, tmp_path).detach(DetachVolumeArgs(volume="other"))
    assert (held.target, held.attached) == ("sda", True)
    assert len(stubborn.detached) == 1


def test_wire_arguments_are_checked() -> None:
    """attach_volume refuses a bus that cannot be hotplugged and unknown keys."""
    with pytest.raises(InvalidArgument, match="sata"):
        AttachVolumeArgs.from_wire({"volume": "v", "bus": "sata"})
    with pytest.raises(InvalidArgument):
        AttachVolumeArgs.from_wire({"volume": "v", "typo": 1})
    with pytest.raises(InvalidArgument):
        DetachVolumeArgs.from_wire({})
    args = AttachVolumeArgs(volume="v", bus="virtio", serial="x", readonly=True)
    assert AttachVolumeArgs.from_wire(args.to_wire()) == args
