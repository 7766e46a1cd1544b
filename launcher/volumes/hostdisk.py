"""hostDisk: the path's last element in the directory the pod mounted from the node
(vmi-disks/<volume>, a hostPath of the path's directory). Disk needs the file; DiskOrCreate
makes a sparse file of its capacity when absent, refused when the node cannot hold it.
The file is used raw, as KubeVirt does (a qcow2 header is never trusted: it could name a
backing file elsewhere). `shared: true` says every node sees the path: the disk is then a
shared one (left in place by a live migration, opened cache=none where O_DIRECT works, as a
ReadWriteMany claim's), and a migration target never makes it."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from launcher.disks import contained, direct_io, make_sparse
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
    shared = bool(source.shared)
    if path.exists():
        if not path.is_file():
            raise DiskFailure(f"{field}.path: {source.path} is not a regular file")
        return _disk(path, shared=shared)
    if shared and req.ctx.incoming:
        raise DiskFailure(
            f"{field}.shared: {source.path} does not exist on the migration target: the "
            "path is not shared with the source node"
        )
    if source.type != HostDiskType.DISK_OR_CREATE:
        raise DiskFailure(f"{field}.path: {source.path} does not exist on the node (type Disk)")
    make_sparse(
        path,
        parse_bytes(source.capacity or 0),
        field=f"{field}.capacity",
        toleration=req.ctx.space_toleration,
    )
    return _disk(path, shared=shared, created=(path,))


def _disk(path: Path, *, shared: bool, created: tuple[Path, ...] = ()) -> ResolvedDisk:
    if not shared:
        return ResolvedDisk(path=path, format="raw", created=created)
    cache = "none" if direct_io(path) else "writethrough"
    return ResolvedDisk(path=path, format="raw", created=created, shared=True, cache=cache)
