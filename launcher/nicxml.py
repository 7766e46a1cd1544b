"""An interface's options in the domain XML (KubeVirt's interface fields) and the q35
machine's spare PCIe root ports.

- pciAddress: the device's <address> (domain:bus:slot.function);
- acpiIndex: <acpi index> (the guest names the NIC eno<N>);
- bootOrder: <boot order>;
- state down: <link state='down'/>, and changed live on a running domain (`link_updates`);
- networkInterfaceMultiqueue: <driver queues=vCPUs> on virtio NICs with a tap (the handler
  makes that tap multi-queue).

Root ports, as KubeVirt lays them out on q35: one per PCIe device the domain starts with
(libvirt puts each endpoint behind a root port of its own) plus spares for hotplug: 3 for
a guest of at most 2 GiB, else enough to reach 32 ports in all.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass

SMALL_GUEST_KIB = 2 * 1024 * 1024
SMALL_SPARE_PORTS = 3
TOTAL_PORTS = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class NicOptions:
    pci_address: str | None = None  # 0000:00:0a.0
    acpi_index: int | None = None
    boot_order: int | None = None
    link_down: bool = False
    queues: int | None = None


def render(el: ET.Element, options: NicOptions) -> None:
    """The options onto an <interface> element."""
    if options.queues:
        ET.SubElement(el, "driver", queues=str(options.queues))
    if options.link_down:
        ET.SubElement(el, "link", state="down")
    if options.boot_order is not None:
        ET.SubElement(el, "boot", order=str(options.boot_order))
    if options.acpi_index is not None:
        ET.SubElement(el, "acpi", index=str(options.acpi_index))
    if options.pci_address:
        ET.SubElement(el, "address", pci_attributes(options.pci_address))


def pci_attributes(address: str) -> dict[str, str]:
    """0000:00:0a.0 as libvirt's <address type='pci' …> attributes."""
    domain, bus, rest = address.split(":")
    slot, function = rest.split(".")
    return {
        "type": "pci",
        "domain": f"0x{domain.lower()}",
        "bus": f"0x{bus.lower()}",
        "slot": f"0x{slot.lower()}",
        "function": f"0x{function.lower()}",
    }


def root_ports(*, cold_devices: int, memory_kib: int) -> int:
    """How many pcie-root-port controllers a q35 domain gets (KubeVirt's count)."""
    if memory_kib <= SMALL_GUEST_KIB:
        return cold_devices + SMALL_SPARE_PORTS
    return max(TOTAL_PORTS, cold_devices + SMALL_SPARE_PORTS)


def render_root_ports(devices: ET.Element, count: int) -> None:
    """q35's root complex (index 0) and `count` root ports numbered from 1 (placed by
    libvirt; controllers it adds later take the indexes after them)."""
    if not count:
        return
    ET.SubElement(devices, "controller", type="pci", index="0", model="pcie-root")
    for index in range(1, count + 1):
        ET.SubElement(devices, "controller", type="pci", index=str(index), model="pcie-root-port")


def link_updates(domain_xml: str, wanted: Mapping[str, bool]) -> list[tuple[str, str]]:
    """(name, interface XML) for each interface of the live domain whose link is not as
    `wanted` (interface name → up); the XML is the device with its new <link state>."""
    root = ET.fromstring(domain_xml)
    out = []
    for iface in root.iterfind("devices/interface"):
        alias = iface.find("alias")
        name = (alias.get("name") or "") if alias is not None else ""
        if not name.startswith("ua-") or name[3:] not in wanted:
            continue
        up = wanted[name[3:]]
        link = iface.find("link")
        now_up = link is None or link.get("state") != "down"
        if now_up == up:
            continue
        if link is None:
            link = ET.SubElement(iface, "link")
        link.set("state", "up" if up else "down")
        out.append((name[3:], ET.tostring(iface, encoding="unicode")))
    return out
