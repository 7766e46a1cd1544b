"""The destination's domain XML: the source's live definition with the target's paths.

libvirt refuses a destination definition whose guest ABI differs from the running one
(device addresses, controllers, CPU model), so the destination XML starts from the
source's migratable XML — addresses and all — and only the host-side details are taken
from the definition the target launcher built for itself: disk files (its own overlay
and cloud-init ISO), the kernelBoot kernel and initrd (its own pod's copies), the serial
log, the console, agent and VNC sockets, and the cgroup partition (each launcher has its own).

A decentralized migration (docs/migration.md) moves the guest to another VMI: the target
prepared a domain of another name (`<namespace>_<name>` of the receiving VMI). The guest
keeps the source's UUID (what it sees in SMBIOS, and what libvirt's ABI check compares)
and takes the target's kubevirt metadata; libvirt refuses a destination definition of
another name, so the name changes by the migration's destination name
(`VIR_MIGRATE_PARAM_DEST_NAME`) and the persistent definition (`renamed`), and the target
launcher finds the domain as its own.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping

from launcher.domxml import KUBEVIRT_NS

ET.register_namespace("kubevirt", KUBEVIRT_NS)


class XmlMismatch(ValueError):
    """The two definitions do not describe the same guest."""


def destination_xml(source_xml: str, target_xml: str) -> str:
    """`source_xml` with the target's host paths and partition."""
    src = ET.fromstring(source_xml)
    tgt = ET.fromstring(target_xml)
    renamed = src.findtext("name") != tgt.findtext("name")
    if renamed:
        _identity(src, tgt)
    elif src.findtext("uuid") != tgt.findtext("uuid"):
        raise XmlMismatch("the target prepared a different domain (uuid differs)")
    _disks(src, tgt)
    _boot_files(src, tgt)
    _chardevs(src, tgt)
    _graphics(src, tgt)
    _partition(src, tgt)
    _emulator(src, tgt)
    return ET.tostring(src, encoding="unicode")


def domain_name(xml: str) -> str:
    """The domain's name in `xml`."""
    return ET.fromstring(xml).findtext("name") or ""


def renamed(xml: str, name: str) -> str:
    """`xml` with the domain named `name`."""
    root = ET.fromstring(xml)
    element = root.find("name")
    if element is not None:
        element.text = name
    return ET.tostring(root, encoding="unicode")


def _identity(src: ET.Element, tgt: ET.Element) -> None:
    """The target's kubevirt metadata on the source's definition (name and UUID kept)."""
    ours, theirs = src.find("metadata"), tgt.find("metadata")
    if ours is not None and theirs is not None:
        index = list(src).index(ours)
        src.remove(ours)
        src.insert(index, theirs)


def writable_disks(xml: str) -> tuple[str, ...]:
    """Target devs of the disks whose contents must travel (not read-only, not cdroms)."""
    root = ET.fromstring(xml)
    out = []
    for disk in root.iterfind("devices/disk"):
        target = disk.find("target")
        if disk.get("device") == "cdrom" or disk.find("readonly") is not None or target is None:
            continue
        out.append(target.get("dev", ""))
    return tuple(d for d in out if d)


def with_slices(xml: str, sizes: Mapping[str, int]) -> str:
    """`xml` with each disk of `sizes` (target dev → bytes) limited to that many bytes from
    its start (libvirt's storage slice): a volume migration's destination claim, at least
    as large as the source disk, is seen by the guest and the copy at the source's size
    (QEMU's mirror needs both ends the same size)."""
    root = ET.fromstring(xml)
    for disk in root.iterfind("devices/disk"):
        target, source = disk.find("target"), disk.find("source")
        dev = target.get("dev", "") if target is not None else ""
        if dev not in sizes or source is None:
            continue
        for old in source.findall("slices"):
            source.remove(old)
        slices = ET.SubElement(source, "slices")
        ET.SubElement(slices, "slice", type="storage", offset="0", size=str(sizes[dev]))
    return ET.tostring(root, encoding="unicode")


def _disks(src: ET.Element, tgt: ET.Element) -> None:
    """Each disk's source as the target has it: a file (`file=`) or a block claim's device
    node (`dev=`, with the disk's type), whichever the target's definition names."""
    wanted: dict[str | None, tuple[str | None, str, str]] = {}
    for disk in tgt.iterfind("devices/disk"):
        target, source = disk.find("target"), disk.find("source")
        if target is None or source is None:
            continue
        attr = "dev" if "dev" in source.attrib else "file"
        if attr in source.attrib:
            wanted[target.get("dev")] = (disk.get("type"), attr, source.attrib[attr])
    for disk in src.iterfind("devices/disk"):
        target, source = disk.find("target"), disk.find("source")
        if target is None or source is None:
            continue
        dev = target.get("dev")
        found = wanted.get(dev)
        if found is None:
            raise XmlMismatch(f"disk {dev} is not in the target's definition")
        kind, attr, path = found
        source.attrib.clear()  # drops the source's index/backing details too
        source.set(attr, path)
        if kind:
            disk.set("type", kind)
        backing = disk.find("backingStore")
        if backing is not None:
            disk.remove(backing)


def _boot_files(src: ET.Element, tgt: ET.Element) -> None:
    for tag in ("kernel", "initrd"):
        ours, theirs = src.find(f"os/{tag}"), tgt.find(f"os/{tag}")
        if ours is not None and theirs is not None:
            ours.text = theirs.text


def _chardevs(src: ET.Element, tgt: ET.Element) -> None:
    for tag in ("serial", "console", "channel"):
        theirs = tgt.find(f"devices/{tag}")
        for ours in src.iterfind(f"devices/{tag}"):
            if theirs is None:
                continue
            for child in ("source", "log"):
                mine, other = ours.find(child), theirs.find(child)
                if mine is not None and other is not None:
                    for attr in ("path", "file"):
                        if attr in other.attrib:
                            mine.set(attr, other.attrib[attr])


def _graphics(src: ET.Element, tgt: ET.Element) -> None:
    """The VNC socket: the target's own path (its element and its listen's)."""
    theirs = tgt.find("devices/graphics")
    if theirs is None or "socket" not in theirs.attrib:
        return
    for ours in src.iterfind("devices/graphics"):
        ours.set("socket", theirs.attrib["socket"])
        for listen in ours.iterfind("listen"):
            if "socket" in listen.attrib:
                listen.set("socket", theirs.attrib["socket"])


def _partition(src: ET.Element, tgt: ET.Element) -> None:
    theirs = tgt.find("resource")
    ours = src.find("resource")
    if ours is not None:
        src.remove(ours)
    if theirs is not None:
        # <resource> sits right after <vcpu> in libvirt's own ordering.
        index = next((i for i, el in enumerate(src) if el.tag == "vcpu"), 0) + 1
        src.insert(index, theirs)


def _emulator(src: ET.Element, tgt: ET.Element) -> None:
    """The target's QEMU: the single-threaded-TCG wrapper lives in each launcher's own
    private dir (launcher/tcgthreads.py)."""
    ours, theirs = src.find("devices/emulator"), tgt.find("devices/emulator")
    if ours is not None and theirs is not None:
        ours.text = theirs.text
