"""Device role tagging: disks[].tag and interfaces[].tag reach the guest as the config
drive's `openstack/latest/meta_data.json` "devices" list (OpenStack's format, which
KubeVirt follows): per tagged device its type (nic, disk), bus, address, the NIC's MAC or
the disk's serial, and its tags. The addresses are libvirt's, so they are read from the
defined domain, and the config drive is rebuilt with them before the domain starts
(launcher/manager.py). Without a cloudInitConfigDrive volume tags have nowhere to go and
are kept in the spec only, as in KubeVirt."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from launcher.volumes.configdrive import add_devices
from shared.model import VirtualMachineInstance


def _drive(vmi: VirtualMachineInstance) -> str | None:
    """The config drive volume's name, if any."""
    return next(
        (v.name for v in vmi.spec.volumes if v.cloud_init_config_drive is not None and v.name),
        None,
    )


def wanted(vmi: VirtualMachineInstance) -> bool:
    """A tagged disk or interface, and a config drive to carry it."""
    devices = vmi.spec.domain.devices
    tagged = any(d.tag for d in devices.disks) or any(i.tag for i in devices.interfaces)
    return tagged and _drive(vmi) is not None


def metadata(vmi: VirtualMachineInstance, domain_xml: str) -> list[dict[str, Any]]:
    """The "devices" entries of the tagged devices found in the defined domain."""
    devices = ET.fromstring(domain_xml).find("devices")
    by_alias = {}
    for el in devices if devices is not None else ():
        alias = el.find("alias")
        if alias is not None:
            by_alias[alias.get("name")] = el
    out = []
    for iface in vmi.spec.domain.devices.interfaces:
        nic = by_alias.get(f"ua-{iface.name}")
        if iface.tag and nic is not None:
            mac = nic.find("mac")
            address = mac.get("address", "") if mac is not None else ""
            out.append({"type": "nic", **_address(nic), "mac": address, "tags": [iface.tag]})
    for disk in vmi.spec.domain.devices.disks:
        found = by_alias.get(f"ua-{disk.name}")
        if disk.tag and found is not None:
            serial = found.findtext("serial")
            entry = {"type": "disk", **_address(found), **({"serial": serial} if serial else {})}
            out.append({**entry, "tags": [disk.tag]})
    return out


def _address(el: ET.Element) -> dict[str, str]:
    """bus and address: a PCI one (0000:01:00.0), else a drive's controller:bus:target:unit
    on its target bus."""
    addr = el.find("address")
    if addr is not None and addr.get("type") == "pci":
        parts = [int(addr.get(k) or "0", 0) for k in ("domain", "bus", "slot", "function")]
        return {"bus": "pci", "address": "{:04x}:{:02x}:{:02x}.{:x}".format(*parts)}
    target = el.find("target")
    bus = target.get("bus", "") if target is not None else ""
    if addr is not None and addr.get("type") == "drive":
        keys = ("controller", "bus", "target", "unit")
        return {"bus": bus, "address": ":".join(addr.get(k) or "0" for k in keys)}
    return {"bus": bus, "address": ""}


async def publish(vmi: VirtualMachineInstance, *, domain_xml: str, work_dir: Path) -> None:
    """Rebuild the config drive with the tagged devices' metadata."""
    drive = _drive(vmi)
    if drive is not None:
        await add_devices(work_dir, volume=drive, devices=metadata(vmi, domain_xml))
