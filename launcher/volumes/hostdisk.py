"""hostDisk: the path's last element in the directory the pod mounted from the node
(vmi-disks/<volume>, a hostPath of the path's directory). Disk needs the file; DiskOrCreate
makes a sparse file of its capacity when absent, refused when the node cannot hold it.
The file is used raw, as KubeVirt does (a qcow2 header is never trusted: it could name a
backing file elsewhere)."""

from __future__ import annotations

from pathlib import PurePosixPath

from launcher.disks import contained, make_sparse
from launcher.errors import DiskFailure
from launcher.volumes.base import ResolvedDisk, VolumeRequest
from shared.model.enums import HostDiskType
from shared.model.quantity import parse_bytes
from shared.model.volumes import HostDiskSource


async def resolve(req: VolumeRequest, source: HostDiskSource) -> ResolvedDisk:
    field = f"{req.field}.hostDisk"
    mount = req.ctx.mount_of(req.name)
    if not mount.is_dir():
        raise DiskFailure(f"{field}: the pod has no mount of {source.path}'s directory at {mount}")
    name = PurePosixPath(source.path or "").name
    path = contained(str(mount / name), (mount,), field=f"{field}.path")
    if path.exists():
        if not path.is_file():
            raise DiskFailure(f"{field}.path: {source.path} is not a regular file")
        return ResolvedDisk(path=path, format="raw")
    if source.type != HostDiskType.DISK_OR_CREATE:
        raise DiskFailure(f"{field}.path: {source.path} does not exist on the node (type Disk)")
    make_sparse(
        path,
        parse_bytes(source.capacity or 0),
        field=f"{field}.capacity",
        toleration=req.ctx.space_toleration,
    )
    return ResolvedDisk(path=path, format="raw", created=(path,))
