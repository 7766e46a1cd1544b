"""`lun` disks (launcher/lun.py): a Block claim's device as `<disk type='block'
device='lun'>` on the scsi bus, valid for libvirt's schema; a lun on a file refused naming
the field; a device that does not answer SG_IO (a loop device, a file) fails the VMI naming
the field, the node and why."""

from __future__ import annotations

import dataclasses
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from launcher import lun
from launcher.domxml import DiskDevice, DiskPlan, build
from launcher.errors import HypervisorUnsupported, InvalidSpec
from shared.model import Disk, VirtualMachineInstance
from tests.unit.launcher.test_domxml import PLAN


def _plan(source: Path, *, block: bool = True) -> DiskPlan:
    return DiskPlan(
        alias="san", device=DiskDevice.LUN, bus="scsi", target="sdb", source=source,
        format="raw", cache="none", block=block,
    )  # fmt: skip


def _vmi() -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict(
        {"metadata": {"name": "v"}, "spec": {"domain": {"devices": {"disks": [
            {"name": "root", "disk": {}}, {"name": "san", "lun": {"bus": "scsi"}},
        ]}}}}
    )  # fmt: skip


def test_a_lun_is_a_block_disk_of_device_lun_on_scsi(tmp_path: Path) -> None:
    """device='lun', type='block', source dev, target bus scsi; the XML validates."""
    plan = dataclasses.replace(PLAN, disks=(*PLAN.disks, _plan(Path("/dev/vmi-disks/san"))))
    xml = build(plan)
    (el,) = [d for d in ET.fromstring(xml).iterfind("devices/disk") if d.get("device") == "lun"]
    assert el.get("type") == "block"
    assert el.find("source").attrib == {"dev": "/dev/vmi-disks/san"}  # type: ignore[union-attr]
    assert el.find("target").attrib == {"dev": "sdb", "bus": "scsi"}  # type: ignore[union-attr]
    path = tmp_path / "domain.xml"
    path.write_text(xml)
    done = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True)
    assert done.returncode == 0, done.stderr


def test_device_and_readonly_from_the_spec() -> None:
    """lun → DiskDevice.LUN (cdrom and disk as before); lun.readonly makes it read-only."""
    assert lun.device(Disk(name="a")) is DiskDevice.DISK
    san = Disk.from_dict({"name": "s", "lun": {"readonly": True}})
    assert lun.device(san) is DiskDevice.LUN and lun.readonly(san)
    assert lun.device(Disk.from_dict({"name": "c", "cdrom": {}})) is DiskDevice.CDROM
    assert not lun.readonly(Disk.from_dict({"name": "s", "lun": {}}))
    assert san.effective_bus == "scsi"


def test_a_lun_on_a_file_is_an_invalid_spec(tmp_path: Path) -> None:
    """A filesystem claim's disk.img cannot be a lun: InvalidSpec naming disks[1].lun."""
    with pytest.raises(InvalidSpec, match=r"spec\.domain\.devices\.disks\[1\]\.lun: .*Block"):
        lun.check(_vmi(), [_plan(tmp_path / "disk.img", block=False)], node="node01")


def test_a_device_without_sg_io_fails_naming_field_and_node(tmp_path: Path) -> None:
    """A device that does not answer SG_IO (here a plain file standing in for a loop
    device): HypervisorUnsupported naming disks[1].lun, the node and the errno."""
    fake = tmp_path / "loop0"
    fake.write_bytes(b"\0" * 4096)
    with pytest.raises(HypervisorUnsupported, match=r"disks\[1\]\.lun: .*node node01.*SG_IO") as e:
        lun.check(_vmi(), [_plan(fake)], node="node01")
    assert e.value.details["fields"][0]["path"] == "spec.domain.devices.disks[1].lun"


def test_plain_disks_are_not_checked(tmp_path: Path) -> None:
    """Only lun disks are probed: a plain block disk passes untouched."""
    plain = dataclasses.replace(_plan(tmp_path / "missing"), device=DiskDevice.DISK)
    lun.check(_vmi(), [plain], node="node01")
