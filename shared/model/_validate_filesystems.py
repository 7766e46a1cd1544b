"""Validation of devices.filesystems (virtiofs shares): a name that is a volume's and a
virtiofs tag (at most 36 bytes, the virtio-fs device's limit), `virtiofs` set, a volume of a
kind virtiofsd can serve as a directory (a claim, a ConfigMap, a Secret, a ServiceAccount, a
downwardAPI: KubeVirt's), not hotplugged and not also a disk's."""

from __future__ import annotations

from shared.model._validate_common import Errors, check_name, check_unique_names
from shared.model.vmi import VMISpec

# The volume sources a filesystem may share (wire names).
SHAREABLE_SOURCES = (
    "persistentVolumeClaim",
    "dataVolume",
    "configMap",
    "secret",
    "serviceAccount",
    "downwardAPI",
)
MAX_TAG_BYTES = 36  # virtio-fs' tag field


def validate_filesystems(errs: Errors, path: str, spec: VMISpec) -> None:
    """Each filesystems[] entry under `path` (spec)."""
    fs_path = f"{path}.domain.devices.filesystems"
    disks = {d.name for d in spec.domain.devices.disks}
    filesystems = spec.domain.devices.filesystems
    for i, fs in enumerate(filesystems):
        where = f"{fs_path}[{i}]"
        check_name(errs, f"{where}.name", fs.name)
        if fs.name and len(fs.name.encode()) > MAX_TAG_BYTES:
            message = f"is the virtiofs tag: at most {MAX_TAG_BYTES} bytes"
            errs.add(f"{where}.name", message, fs.name)
        if fs.virtiofs is None:
            errs.add(f"{where}.virtiofs", "is required (the only filesystem type)")
        if not fs.name:
            continue
        volume = spec.volume(fs.name)
        if volume is None:
            errs.add(f"{where}.name", f"no volume named {fs.name!r} in spec.volumes", fs.name)
            continue
        if fs.name in disks:
            errs.add(f"{where}.name", f"volume {fs.name!r} is a disk's too", fs.name)
        kinds = volume.sources()
        if kinds and kinds[0] not in SHAREABLE_SOURCES:
            errs.add(
                f"{where}.name",
                f"volume {fs.name!r} ({kinds[0]}) cannot be shared: virtiofs shares only "
                f"{', '.join(SHAREABLE_SOURCES)} volumes",
                fs.name,
            )
        elif volume.is_hotplug:
            errs.add(f"{where}.name", f"volume {fs.name!r} is hotpluggable: not shareable", fs.name)
    check_unique_names(errs, fs_path, [fs.name for fs in filesystems])
