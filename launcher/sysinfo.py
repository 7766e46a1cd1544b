"""The guest's firmware tables beside the boot loader.

- SMBIOS (`<sysinfo type='smbios'>`, with `<smbios mode='sysinfo'/>` in `<os>`): type 1
  (system) from firmware.uuid / firmware.serial, type 3 (chassis) from domain.chassis
  (manufacturer, version, serial, asset, sku), as KubeVirt writes them. QEMU gets them as
  `-smbios type=1,…` and `-smbios type=3,…`; the guest reads them with dmidecode or under
  /sys/class/dmi/id/.
- ACPI (`<os><acpi><table type='slic'>`): firmware.acpi.slicNameRef's Secret volume, its
  key `slic.bin` (KubeVirt's file name) as the table body; QEMU's `-acpitable sig=SLIC`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from launcher.disks import DiskContext
from launcher.errors import DiskFailure
from shared import podlayout
from shared.model import VirtualMachineInstance

# firmware.acpi's field → (libvirt's table type, the Secret's key)
ACPI_TABLES = {"slicNameRef": ("slic", "slic.bin"), "msdmNameRef": ("msdm", "msdm.bin")}


def acpi_tables(vmi: VirtualMachineInstance, ctx: DiskContext) -> tuple[tuple[str, Path], ...]:
    """(table type, file) of each table firmware.acpi names; DiskFailure naming the field
    when its Secret lacks the key (admission checked the volume is a diskless Secret)."""
    acpi = vmi.spec.domain.firmware.acpi
    tables = []
    for field, volume in acpi.refs() if acpi is not None else ():
        kind, key = ACPI_TABLES[field]
        path = ctx.config_mount_of(podlayout.SECRET_SUBDIR, volume) / key
        if not path.is_file():
            raise DiskFailure(
                f"spec.domain.firmware.acpi.{field}: the Secret of volume {volume!r} "
                f"has no key {key!r}"
            )
        tables.append((kind, path))
    return tuple(tables)


def render_acpi(os_el: ET.Element, tables: tuple[tuple[str, Path], ...]) -> None:
    """`<acpi>` with a `<table>` per table, in `<os>`."""
    if not tables:
        return
    acpi = ET.SubElement(os_el, "acpi")
    for kind, path in tables:
        table = ET.SubElement(acpi, "table", type=kind)
        table.text = str(path)


def render(
    dom: ET.Element,
    *,
    uuid: str | None,
    serial: str | None,
    chassis: tuple[tuple[str, str], ...],
) -> None:
    """Append `<sysinfo type='smbios'>` with the system and chassis entries that are set."""
    info = ET.SubElement(dom, "sysinfo", type="smbios")
    system = [(name, value) for name, value in (("uuid", uuid), ("serial", serial)) if value]
    if system:
        _entries(ET.SubElement(info, "system"), system)
    if chassis:
        _entries(ET.SubElement(info, "chassis"), chassis)


def _entries(
    parent: ET.Element, pairs: list[tuple[str, str]] | tuple[tuple[str, str], ...]
) -> None:
    for name, value in pairs:
        entry = ET.SubElement(parent, "entry", name=name)
        entry.text = value
