"""The domain's SMBIOS tables (`<sysinfo type='smbios'>`, with `<smbios mode='sysinfo'/>` in
`<os>`): type 1 (system) from firmware.uuid / firmware.serial, type 3 (chassis) from
domain.chassis (manufacturer, version, serial, asset, sku), as KubeVirt writes them. QEMU
gets them as `-smbios type=1,…` and `-smbios type=3,…`; the guest reads them with
dmidecode or under /sys/class/dmi/id/.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET


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
