"""CD-ROM media of a running domain (KubeVirt's declarative inject/eject): a declared
cdrom is planned with an empty tray, a volume for it is inserted in place (the device
unchanged but for its source) and ejected on detach, the cdrom staying."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from launcher import cdrom, domxml
from launcher.disks import DiskContext
from launcher.errors import DiskFailure
from launcher.hotplug import Hotplug, HotplugConfig
from launcher.plan import _disks
from shared.model import Disk, VirtualMachineInstance
from shared.wire.launcher_api import AttachVolumeArgs, DetachVolumeArgs

LIVE_CDROM = """<disk type="file" device="cdrom"><driver name="qemu" type="raw"/>
<target dev="sda" bus="sata"/><readonly/><boot order="2"/><alias name="ua-cd"/>
<address type="drive" controller="0" bus="0" target="0" unit="0"/></disk>"""
DOMAIN = f"""<domain><name>ns_vm</name><devices>
<disk type="file" device="disk"><target dev="vda" bus="virtio"/><alias name="ua-boot"/></disk>
{LIVE_CDROM}</devices></domain>"""


class FakeVirt:
    """A live domain whose cdrom's source update_device replaces; `locked` keeps it."""

    def __init__(self, *, locked: bool = False) -> None:
        self.root = ET.fromstring(DOMAIN)
        self.locked = locked
        self.updates: list[str] = []

    async def xml(self, name: str) -> str:
        return ET.tostring(self.root, encoding="unicode")

    async def attach_device(self, name: str, xml: str) -> None:
        raise AssertionError("a cdrom's media is changed in place, never attached")

    async def detach_device(self, name: str, xml: str) -> None:
        raise AssertionError("a cdrom is never detached")

    async def update_device(self, name: str, xml: str) -> None:
        self.updates.append(xml)
        new = ET.fromstring(xml)
        if self.locked and new.find("source") is None:
            return
        devices = self.root.find("devices")
        assert devices is not None
        old = next(d for d in devices.findall("disk") if d.get("device") == "cdrom")
        devices.remove(old)
        devices.append(new)


def _hotplug(virt: FakeVirt, tmp_path: Path) -> Hotplug:
    config = HotplugConfig(disks_dir=tmp_path, detach_wait=0.05, poll=0.01)
    return Hotplug(virt=virt, domain=lambda: "ns_vm", config=config)


async def test_insert_then_eject_changes_only_the_source(tmp_path: Path) -> None:
    """attach of the cdrom's volume: one update_device with the live device plus a file
    source (target, boot order, address, alias kept); again: nothing more. detach: the
    source dropped, the cdrom still there, reported released."""
    (tmp_path / "cd.img").write_bytes(b"MARKER")
    virt = FakeVirt()
    hotplug = _hotplug(virt, tmp_path)
    reply = await hotplug.attach(AttachVolumeArgs(volume="cd", bus="sata"))
    assert (reply.target, reply.attached) == ("sda", True)
    await hotplug.attach(AttachVolumeArgs(volume="cd", bus="sata"))
    (inserted,) = virt.updates
    disk = ET.fromstring(inserted)
    assert disk.find("source").get("file") == str(tmp_path / "cd.img")  # type: ignore[union-attr]
    assert disk.find("boot").get("order") == "2"  # type: ignore[union-attr]
    assert disk.find("address") is not None and disk.find("readonly") is not None
    reply = await hotplug.detach(DetachVolumeArgs(volume="cd"))
    assert (reply.target, reply.attached) == ("sda", False)
    ejected = ET.fromstring(virt.updates[-1])
    assert ejected.find("source") is None and ejected.get("device") == "cdrom"
    assert len(virt.root.findall("devices/disk")) == 2
    again = await hotplug.detach(DetachVolumeArgs(volume="cd"))
    assert again.attached is False and len(virt.updates) == 2


async def test_a_locked_tray_is_reported_held(tmp_path: Path) -> None:
    """The guest keeps the tray locked: detach says the media is still held (the handler
    retries until its deadline)."""
    (tmp_path / "cd.img").write_bytes(b"MARKER")
    virt = FakeVirt(locked=True)
    hotplug = _hotplug(virt, tmp_path)
    await hotplug.attach(AttachVolumeArgs(volume="cd", bus="sata"))
    assert (await hotplug.detach(DetachVolumeArgs(volume="cd"))).attached is True


async def test_insert_without_the_file_is_refused(tmp_path: Path) -> None:
    """No hotplug-disks file for the volume: DiskFailure naming it, nothing changed."""
    virt = FakeVirt()
    with pytest.raises(DiskFailure, match="'cd'"):
        await _hotplug(virt, tmp_path).attach(AttachVolumeArgs(volume="cd", bus="sata"))
    assert virt.updates == []


def test_block_media_is_a_block_source() -> None:
    """A Block claim's device goes in as <disk type='block'><source dev=…>."""
    xml = cdrom.insert_xml(ET.fromstring(LIVE_CDROM), Path("/dev/x"), block=True)
    disk = ET.fromstring(xml)
    assert disk.get("type") == "block"
    assert disk.find("source").get("dev") == "/dev/x"  # type: ignore[union-attr]


def test_an_empty_cdrom_is_planned_without_a_source(tmp_path: Path) -> None:
    """A cdrom disk without a volume (or with a hotplugged one): a read-only sata cdrom,
    no <source>, its boot order kept; the domain passes virt-xml-validate."""
    disk = Disk.from_dict({"name": "cd", "cdrom": {"bus": "sata"}, "bootOrder": 3})
    plan = cdrom.empty_plan(disk, target="sda")
    assert (plan.target, plan.source, plan.readonly) == ("sda", None, True)
    el = ET.fromstring(domxml.disk_xml(plan))
    assert el.get("device") == "cdrom" and el.find("source") is None
    assert el.find("boot").get("order") == "3"  # type: ignore[union-attr]
    domain = (
        "<domain type='qemu'><name>x</name><memory>65536</memory><os><type>hvm</type></os>"
        f"<devices>{ET.tostring(el, encoding='unicode')}</devices></domain>"
    )
    path = tmp_path / "d.xml"
    path.write_text(domain)
    out = subprocess.run(
        ["virt-xml-validate", str(path), "domain"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr


async def test_cdroms_without_media_are_planned_empty_and_hotplugged_disks_skipped(
    tmp_path: Path,
) -> None:
    """A cdrom with no volume and one whose volume is hot-plugged: both defined with an
    empty tray (sda, sdb: sata's next names); a hot-plugged plain disk is not defined (the
    handler attaches it live)."""
    hot = {"claimName": "c", "hotpluggable": True}
    vmi = VirtualMachineInstance.from_dict({
        "metadata": {"name": "vm", "namespace": "ns"},
        "spec": {
            "domain": {"devices": {"disks": [
                {"name": "tray", "cdrom": {"bus": "sata"}},
                {"name": "media", "cdrom": {"bus": "sata"}},
                {"name": "data", "disk": {"bus": "scsi"}},
            ]}},
            "volumes": [
                {"name": "media", "persistentVolumeClaim": hot},
                {"name": "data", "persistentVolumeClaim": {**hot, "claimName": "d"}},
            ],
        },
    })  # fmt: skip
    ctx = DiskContext(work_dir=tmp_path, container_disks=tmp_path / "c", vmi_disks=tmp_path / "v")
    plans = await _disks(vmi, ctx)
    assert [(p.alias, p.target, p.source, p.device) for p in plans] == [
        ("tray", "sda", None, "cdrom"),
        ("media", "sdb", None, "cdrom"),
    ]
