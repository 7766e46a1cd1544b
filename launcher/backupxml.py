"""The XML of a push-mode backup (libvirt's <domainbackup>) and of the checkpoint made with
it (<domaincheckpoint>), from the live domain's disks.

Which disks, and how:
- every writable disk of ours (alias `ua-<volume>`, a file or a device, not a CD-ROM) is
  backed up into `<target dir>/<volume>.qcow2`;
- a qcow2 disk (emptyDisk, the overlays of containerDisks and ephemeral volumes) carries a
  persistent dirty bitmap named after the checkpoint: the next backup from that checkpoint
  copies only the blocks written since (backupmode='incremental');
- a raw disk (a claim's disk.img, a block claim, a hostDisk) cannot hold a bitmap: it is
  left out of the checkpoint and copied in full by every backup (`untracked` says which).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

ALIAS_PREFIX = "ua-"
BITMAP_FORMATS = frozenset({"qcow2"})


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupDisk:
    """One disk of the live domain as the backup sees it."""

    volume: str  # the VMI's disk (= volume) name, from the alias
    target: str  # vda …
    format: str  # the driver type: qcow2, raw
    block: bool = False

    @property
    def tracked(self) -> bool:
        """Whether the disk can carry a persistent dirty bitmap (a checkpoint)."""
        return self.format in BITMAP_FORMATS


def backup_disks(domain_xml: str) -> Iterator[BackupDisk]:
    """The live domain's disks a backup copies: ours, writable, with a source, no CD-ROM."""
    for disk in ET.fromstring(domain_xml).iterfind("devices/disk"):
        alias, target, source = disk.find("alias"), disk.find("target"), disk.find("source")
        name = alias.get("name", "") if alias is not None else ""
        if disk.get("device", "disk") != "disk" or disk.find("readonly") is not None:
            continue
        if not name.startswith(ALIAS_PREFIX) or target is None or source is None:
            continue
        if not (source.get("file") or source.get("dev")) or not target.get("dev"):
            continue
        driver = disk.find("driver")
        yield BackupDisk(
            volume=name.removeprefix(ALIAS_PREFIX),
            target=str(target.get("dev")),
            format=(driver.get("type") if driver is not None else None) or "raw",
            block=disk.get("type") == "block",
        )


def target_file(target_dir: str, disk: BackupDisk) -> str:
    """Where a disk's backup goes: `<volume>.qcow2` in the target directory."""
    return str(PurePosixPath(target_dir) / f"{disk.volume}.qcow2")


def backup_xml(
    disks: Sequence[BackupDisk], *, target_dir: str, incremental: str | None = None
) -> str:
    """<domainbackup mode='push'>: each disk into its qcow2 file on the target; with
    `incremental`, the tracked disks copy only what changed since that checkpoint."""
    root = ET.Element("domainbackup", mode="push")
    if incremental:
        ET.SubElement(root, "incremental").text = incremental
    listed = ET.SubElement(root, "disks")
    for disk in disks:
        el = ET.SubElement(listed, "disk", name=disk.target, backup="yes", type="file")
        if incremental and disk.tracked:
            el.set("backupmode", "incremental")
            el.set("incremental", incremental)
        else:
            el.set("backupmode", "full")
        ET.SubElement(el, "target", file=target_file(target_dir, disk))
        ET.SubElement(el, "driver", type="qcow2")
    return _text(root)


def checkpoint_xml(name: str, disks: Iterable[BackupDisk]) -> str:
    """<domaincheckpoint>: a bitmap named `name` on every tracked disk, none on the rest."""
    root = ET.Element("domaincheckpoint")
    ET.SubElement(root, "name").text = name
    listed = ET.SubElement(root, "disks")
    for disk in disks:
        if disk.tracked:
            ET.SubElement(listed, "disk", name=disk.target, checkpoint="bitmap", bitmap=name)
        else:
            ET.SubElement(listed, "disk", name=disk.target, checkpoint="no")
    return _text(root)


def untracked(disks: Iterable[BackupDisk]) -> list[str]:
    """The volumes whose disk cannot carry a bitmap (copied in full every time)."""
    return [d.volume for d in disks if not d.tracked]


def _text(root: ET.Element) -> str:
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"
