"""persistentVolumeClaim (filesystem mode): `disk.img` in the claim's mount
(vmi-disks/<volume>), made sparse to the claim's size when absent, as KubeVirt does; used
raw. A readOnly claim stays read-only in the guest and is never written, not even to make
its disk."""

from __future__ import annotations

from launcher.disks import contained, make_sparse
from launcher.errors import DiskFailure
from launcher.volumes.base import ResolvedDisk, VolumeRequest
from shared import podlayout
from shared.model.volumes import PersistentVolumeClaimSource


async def resolve(req: VolumeRequest, source: PersistentVolumeClaimSource) -> ResolvedDisk:
    field = f"{req.field}.persistentVolumeClaim"
    claim = source.claim_name
    mount = req.ctx.mount_of(req.name)
    readonly = bool(source.read_only)
    if not mount.is_dir():
        raise DiskFailure(f"{field}: claim {claim!r} is not mounted in the pod at {mount}")
    path = contained(str(mount / podlayout.PVC_DISK_FILE), (mount,), field=field)
    if path.exists():
        if not path.is_file():
            raise DiskFailure(f"{field}: {podlayout.PVC_DISK_FILE} of claim {claim!r} is no file")
        return ResolvedDisk(path=path, format="raw", readonly=readonly)
    if readonly:
        raise DiskFailure(
            f"{field}: claim {claim!r} is readOnly and holds no {podlayout.PVC_DISK_FILE}"
        )
    size = req.ctx.claim_capacities.get(req.name)
    if not size:
        raise DiskFailure(
            f"{field}: claim {claim!r} holds no {podlayout.PVC_DISK_FILE} and its size is unknown"
        )
    make_sparse(path, size, field=field, toleration=req.ctx.space_toleration)
    return ResolvedDisk(path=path, format="raw", created=(path,))
