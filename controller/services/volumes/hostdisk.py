"""hostDisk: the directory of the path on the node, as a hostPath volume (Directory for
type Disk, DirectoryOrCreate for DiskOrCreate), mounted at `vmi-disks/<volume>`; the
launcher finds (or makes, to capacity) the path's last element there. KubeVirt's layout."""

from __future__ import annotations

from controller.services.volumes.base import PodVolumes, RenderContext
from shared import podlayout
from shared.model import Volume
from shared.model.enums import HostDiskType
from shared.model.volumes import HostDiskSource


def render(volume: Volume, source: HostDiskSource, ctx: RenderContext) -> PodVolumes:
    """The hostPath volume of the path's directory and its mount."""
    del ctx
    name = volume.name or ""
    pod_volume = podlayout.pod_volume_name(name)
    create = source.type == HostDiskType.DISK_OR_CREATE
    host_path = {
        "path": podlayout.host_disk_dir(source.path or ""),
        "type": "DirectoryOrCreate" if create else "Directory",
    }
    mount = {
        "name": pod_volume,
        "mountPath": f"{podlayout.VMI_DISKS_DIR}/{podlayout.vmi_disk_dir(name)}",
    }
    return PodVolumes(volumes=({"name": pod_volume, "hostPath": host_path},), mounts=(mount,))
