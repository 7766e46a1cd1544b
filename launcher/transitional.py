"""devices.useVirtioTransitional: every virtio device of the domain in its transitional
model (virtio 0.9 and 1.0 both offered, for guests as old as RHEL 6), as KubeVirt does.
Applied to the finished <devices> element, so each device module stays unaware of it.
On q35 libvirt puts transitional devices on conventional PCI (a pcie-to-pci-bridge it
adds). virtio-mem and virtio input devices have no transitional model (libvirt refuses
one on a keyboard or tablet) and are left alone."""

from __future__ import annotations

import xml.etree.ElementTree as ET

TRANSITIONAL = "virtio-transitional"


def apply(devices: ET.Element) -> None:
    """Switch every virtio device under `devices` to virtio-transitional."""
    for disk in devices.iterfind("disk"):
        target = disk.find("target")
        if target is not None and target.get("bus") == "virtio":
            disk.set("model", TRANSITIONAL)
    for model in devices.iterfind("interface/model"):
        if model.get("type") == "virtio":
            model.set("type", TRANSITIONAL)
    for tag in ("memballoon", "rng", "vsock"):
        for el in devices.iterfind(tag):
            if el.get("model") == "virtio":
                el.set("model", TRANSITIONAL)
    for el in devices.iterfind("controller"):
        if el.get("type") == "scsi" and el.get("model") == "virtio-scsi":
            el.set("model", TRANSITIONAL)
    if (
        devices.find("channel") is not None
        and devices.find("controller[@type='virtio-serial']") is None
    ):  # the agent channel's controller, implicit otherwise
        ET.SubElement(devices, "controller", type="virtio-serial", index="0", model=TRANSITIONAL)
