"""Device role tagging (launcher/devtags.py): tagged NICs and disks are listed in the
config drive's meta_data.json "devices" with libvirt's addresses read from the defined
domain (a NIC's PCI address and MAC, a virtio disk's PCI address and serial, a SCSI disk's
drive address); the config drive ISO is rebuilt with them. Untagged devices are not listed;
without a config drive nothing is wanted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from launcher import devtags
from shared.model import VirtualMachineInstance
from tests.unit.launcher.test_config_isos import _iso_read
from tests.unit.launcher.test_volumes import _ctx, _resolve

# What libvirt's XMLDesc answers for a defined q35 domain (the parts devtags reads).
DEFINED = """<domain type='qemu'><devices>
  <disk type='file' device='disk'><target dev='vda' bus='virtio'/><serial>DB01</serial>
    <alias name='ua-db'/><address type='pci' domain='0x0000' bus='0x04' slot='0x00'
    function='0x0'/></disk>
  <disk type='file' device='disk'><target dev='sda' bus='scsi'/><alias name='ua-logs'/>
    <address type='drive' controller='0' bus='0' target='0' unit='1'/></disk>
  <disk type='file' device='disk'><target dev='vdb' bus='virtio'/><alias name='ua-plain'/>
    <address type='pci' domain='0x0000' bus='0x05' slot='0x00' function='0x0'/></disk>
  <interface type='ethernet'><mac address='52:54:00:aa:bb:cc'/><alias name='ua-default'/>
    <address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/></interface>
</devices></domain>"""


def _vmi(*, drive: bool = True) -> VirtualMachineInstance:
    volumes: list[dict[str, Any]] = [
        {"name": n, "emptyDisk": {"capacity": "1Mi"}} for n in ("db", "logs", "plain")
    ]
    if drive:
        volumes.append({"name": "drive", "cloudInitConfigDrive": {"userData": "#cloud-config"}})
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "tiny", "namespace": "default"},
        "spec": {
            "domain": {"devices": {
                "disks": [
                    {"name": "db", "disk": {}, "serial": "DB01", "tag": "database"},
                    {"name": "logs", "disk": {"bus": "scsi"}, "tag": "logs"},
                    {"name": "plain", "disk": {}},
                ],
                "interfaces": [{"name": "default", "masquerade": {}, "tag": "frontend"}],
            }},
            "networks": [{"name": "default", "pod": {}}],
            "volumes": volumes,
        },
    })  # fmt: skip


EXPECTED = [
    {"type": "nic", "bus": "pci", "address": "0000:01:00.0", "mac": "52:54:00:aa:bb:cc",
     "tags": ["frontend"]},
    {"type": "disk", "bus": "pci", "address": "0000:04:00.0", "serial": "DB01",
     "tags": ["database"]},
    {"type": "disk", "bus": "scsi", "address": "0:0:0:1", "tags": ["logs"]},
]  # fmt: skip


def test_tagged_devices_with_libvirts_addresses() -> None:
    """NIC (pci, MAC), virtio disk (pci, serial), scsi disk (drive address); no entry for
    the untagged disk."""
    assert devtags.metadata(_vmi(), DEFINED) == EXPECTED


def test_wanted_only_with_tags_and_a_config_drive() -> None:
    """Tags and a config drive: wanted; tags without a drive: not."""
    assert devtags.wanted(_vmi())
    assert not devtags.wanted(_vmi(drive=False))


async def test_the_config_drive_is_rebuilt_with_the_devices(tmp_path: Path) -> None:
    """After publish, the ISO's meta_data.json holds KubeVirt's keys and the devices."""
    ctx = _ctx(tmp_path)
    resolved = await _resolve(ctx, {"name": "drive", "cloudInitConfigDrive": {"userData": "#"}})
    await devtags.publish(_vmi(), domain_xml=DEFINED, work_dir=ctx.work_dir)
    meta = json.loads(_iso_read(resolved.path, "/openstack/latest/meta_data.json"))
    assert meta["devices"] == EXPECTED
    assert meta["instance_id"] == "tiny.default"
