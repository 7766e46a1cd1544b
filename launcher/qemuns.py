"""What the domain XML asks of QEMU through libvirt's QEMU namespace, for KubeVirt fields
libvirt 9.0's own schema lacks:
- blockSize.custom.discardGranularity: `<qemu:override>` sets the disk's frontend property
  `discard_granularity` (libvirt >= 8.2), the disk found by its user alias `ua-<name>`;
- Hyper-V tlbflush.direct / .extended (libvirt 9.1's `<tlbflush><direct/><extended/>`):
  `-global x86_64-cpu.hv-tlbflush-direct=on` / `hv-tlbflush-ext=on`, every vCPU's QEMU
  property (x86_64-cpu is the parent type of every x86 CPU model).
The domain is then "tainted" (custom arguments) in libvirt's log; nothing else changes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
ET.register_namespace("qemu", QEMU_NS)
CPU_TYPE = "x86_64-cpu"


def _q(tag: str) -> str:
    return f"{{{QEMU_NS}}}{tag}"


def override_discard(dom: ET.Element, disks: Sequence[tuple[str, int]]) -> None:
    """`<qemu:override>` of each (device alias, discard granularity in bytes)."""
    if not disks:
        return
    override = ET.SubElement(dom, _q("override"))
    for alias, granularity in disks:
        device = ET.SubElement(override, _q("device"), alias=alias)
        frontend = ET.SubElement(device, _q("frontend"))
        ET.SubElement(
            frontend,
            _q("property"),
            name="discard_granularity",
            type="unsigned",
            value=str(granularity),
        )


def cpu_globals(dom: ET.Element, properties: Sequence[str]) -> None:
    """`-global x86_64-cpu.<property>=on` for each CPU property, in the domain's one
    `<qemu:commandline>` (made when absent)."""
    if not properties:
        return
    cmd = dom.find(_q("commandline"))
    if cmd is None:
        cmd = ET.SubElement(dom, _q("commandline"))
    for prop in properties:
        ET.SubElement(cmd, _q("arg"), value="-global")
        ET.SubElement(cmd, _q("arg"), value=f"{CPU_TYPE}.{prop}=on")
