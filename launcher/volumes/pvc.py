"""persistentVolumeClaim. Block mode: the claim's device node (the pod's volumeDevices at
/dev/vmi-disks/<volume>) is the guest's disk as it is, raw, cache=none. Filesystem mode:
`disk.img` in the claim's mount
(vmi-disks/<volume>), made sparse to the claim's size when absent, as KubeVirt does; used
raw. A readOnly claim stays read-only in the guest and is never written, not even to make
its disk.

The disk is the claim's, not the pod's: a migration target opens the same file (the VMI
is live-migratable only on a ReadWriteMany claim) and never makes one, so it is marked
shared and is not copied by the migration. The exception is a volume migration's
destination claim (shared.volumemigration): the target makes its disk.img to the claim's
size as a first start would, and the migration copies the disk into it, not shared; so is a
decentralized migration's receiving VMI's claim (the guest's claim disk of the same
volume name is copied into it).
Opened with cache=none where the filesystem takes O_DIRECT (KubeVirt's default;
writethrough otherwise), so no host page cache holds guest writes when the other
node's QEMU takes over."""

from __future__ import annotations

import stat
from pathlib import Path

from launcher.disks import contained, direct_io, make_sparse
from launcher.errors import DiskFailure
from launcher.volumes.base import ResolvedDisk, VolumeRequest
from shared import podlayout
from shared.model.volumes import PersistentVolumeClaimSource
from shared.volumemigration import migrated_volumes


async def resolve(req: VolumeRequest, source: PersistentVolumeClaimSource) -> ResolvedDisk:
    field = f"{req.field}.persistentVolumeClaim"
    claim = source.claim_name
    mount = req.ctx.mount_of(req.name)
    readonly = bool(source.read_only)
    device = req.ctx.block_device_of(req.name)
    # A volume migration's destination claim, or a receiving VMI's claim, on the target:
    # the migration copies the disk into it. (The source's own disk stays shared: it names
    # the volumes it copies.)
    shared = not (req.ctx.incoming and req.name in migrated_volumes(req.vmi))
    if _is_block(device):
        return ResolvedDisk(
            path=device, format="raw", readonly=readonly, shared=shared, cache="none", block=True
        )
    if not mount.is_dir():
        raise DiskFailure(f"{field}: claim {claim!r} is not mounted in the pod at {mount}")
    path = contained(str(mount / podlayout.PVC_DISK_FILE), (mount,), field=field)
    if path.exists():
        if not path.is_file():
            raise DiskFailure(f"{field}: {podlayout.PVC_DISK_FILE} of claim {claim!r} is no file")
        return _disk(path, readonly=readonly, shared=shared)
    if req.ctx.incoming and shared:
        raise DiskFailure(
            f"{field}: claim {claim!r} holds no {podlayout.PVC_DISK_FILE} on the migration "
            "target: its storage is not shared with the source node"
        )
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
    return _disk(path, readonly=False, created=(path,), shared=shared)


def _disk(
    path: Path, *, readonly: bool, shared: bool, created: tuple[Path, ...] = ()
) -> ResolvedDisk:
    cache = "none" if direct_io(path) else "writethrough"
    return ResolvedDisk(
        path=path, format="raw", readonly=readonly, created=created, shared=shared, cache=cache
    )


def _is_block(path: Path) -> bool:
    try:
        return stat.S_ISBLK(path.stat().st_mode)
    except OSError:
        return False
