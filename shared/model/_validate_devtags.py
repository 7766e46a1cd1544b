"""Validation of `lun` disks and device `tag`s. A lun passes SCSI commands through to a
claim's device: on the scsi bus (virtio-scsi), of a persistentVolumeClaim or dataVolume
(the launcher checks it is Block-mode and answers SG_IO), not hotplugged. A tag (disks and
interfaces) lands in the config drive's device metadata: 1-255 characters, no whitespace."""

from __future__ import annotations

import re

from shared.model._validate_common import Errors
from shared.model.vmi import VMISpec

LUN_BUS = "scsi"
LUN_SOURCES = ("persistentVolumeClaim", "dataVolume")
_TAG = re.compile(r"\S{1,255}")


def validate_luns_and_tags(errs: Errors, path: str, spec: VMISpec) -> None:
    """disks[].lun, disks[].tag and interfaces[].tag under `path` (spec)."""
    devices = spec.domain.devices
    for i, disk in enumerate(devices.disks):
        where = f"{path}.domain.devices.disks[{i}]"
        _check_tag(errs, f"{where}.tag", disk.tag)
        if disk.lun is None:
            continue
        if disk.lun.bus is not None and disk.lun.bus != LUN_BUS:
            message = "SCSI passthrough is on the scsi bus only (virtio-scsi)"
            errs.add(f"{where}.lun.bus", message, disk.lun.bus)
        volume = spec.volume(disk.name) if disk.name else None
        kinds = volume.sources() if volume is not None else ()
        if kinds and kinds[0] not in LUN_SOURCES:
            message = f"needs a Block-mode persistentVolumeClaim or dataVolume, not {kinds[0]}"
            errs.add(f"{where}.lun", message)
        elif volume is not None and volume.is_hotplug:
            errs.add(f"{where}.lun", "a lun disk cannot be hotplugged")
    for i, iface in enumerate(devices.interfaces):
        _check_tag(errs, f"{path}.domain.devices.interfaces[{i}].tag", iface.tag)


def _check_tag(errs: Errors, path: str, tag: str | None) -> None:
    if tag is not None and not _TAG.fullmatch(tag):
        errs.add(path, "must be 1-255 characters without whitespace", tag)
