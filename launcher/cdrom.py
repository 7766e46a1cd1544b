"""CD-ROM media of a running domain: inserted and ejected in place (KubeVirt's declarative
inject/eject: a cdrom disk whose volume comes and goes).

The cdrom device stays; only its <source> changes, through updateDeviceFlags (libvirt's
change-media path). The new definition is the live one with the source replaced, so
everything libvirt refuses to change on a live disk (target, bus, address, boot order,
serial, alias) is unchanged by construction:

    xml = insert_xml(live_cdrom, path, block=False)   # media in
    xml = eject_xml(live_cdrom)                       # tray empty

At domain definition a cdrom without a volume, or whose volume is hot-plugged (not there
yet), is planned with an empty tray (`empty_plan`).
"""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from pathlib import Path

from launcher import diskxml
from launcher.domxml import DiskDevice, DiskPlan
from shared.model import Disk

# What libvirt reports of the media it holds, dropped before the definition goes back.
_MEDIA_ELEMENTS = ("source", "backingStore")


def is_cdrom(disk: ET.Element) -> bool:
    return disk.get("device") == "cdrom"


def media(disk: ET.Element) -> str | None:
    """The file or device in the tray (None: empty)."""
    source = disk.find("source")
    if source is None:
        return None
    return source.get("file") or source.get("dev")


def _without_media(disk: ET.Element) -> ET.Element:
    out = copy.deepcopy(disk)
    for tag in _MEDIA_ELEMENTS:
        for el in out.findall(tag):
            out.remove(el)
    return out


def insert_xml(disk: ET.Element, path: Path, *, block: bool) -> str:
    """The live cdrom `disk` holding `path` (a file, or a block device)."""
    out = _without_media(disk)
    out.set("type", "block" if block else "file")
    driver = out.find("driver")
    if driver is not None:
        driver.set("type", "raw")
    source = ET.Element("source", {"dev" if block else "file": str(path)})
    out.insert(_after_driver(out), source)
    return ET.tostring(out, encoding="unicode")


def eject_xml(disk: ET.Element) -> str:
    """The live cdrom `disk` with its tray empty."""
    out = _without_media(disk)
    out.set("type", "file")
    return ET.tostring(out, encoding="unicode")


def _after_driver(disk: ET.Element) -> int:
    """Where <source> goes: after <driver> (libvirt's order; it accepts any)."""
    for index, child in enumerate(disk):
        if child.tag == "driver":
            return index + 1
    return 0


def empty_plan(disk: Disk, *, target: str) -> DiskPlan:
    """A read-only cdrom without media on its bus at `target` (boot order and serial kept)."""
    return DiskPlan(
        alias=disk.name or "",
        device=DiskDevice.CDROM,
        bus=disk.effective_bus,
        target=target,
        source=None,
        format="raw",
        readonly=True,
        boot_order=disk.boot_order,
        serial=disk.serial,
        options=diskxml.DiskOptions(tray=disk.cdrom.tray if disk.cdrom is not None else None),
    )
