"""ephemeral: a qcow2 overlay in the launcher's scratch over the claim's disk (its
`disk.img`, or a block-mode claim's device), which stays a read-only backing file: the
guest's writes live in the overlay and are gone with the pod (KubeVirt's behaviour). The
claim must hold its disk: an ephemeral volume never makes one."""

from __future__ import annotations

import stat
from pathlib import Path

from launcher.disks import contained, format_of, run_tool
from launcher.errors import DiskFailure
from launcher.volumes.base import ResolvedDisk, VolumeRequest
from shared import podlayout
from shared.model.volumes import EphemeralSource


def _backing(req: VolumeRequest, source: EphemeralSource) -> tuple[Path, str]:
    """The claim's disk and its format (a block device is used raw)."""
    field = f"{req.field}.ephemeral.persistentVolumeClaim"
    pvc = source.persistent_volume_claim
    claim = pvc.claim_name if pvc is not None else None
    device = req.ctx.block_device_of(req.name)
    try:
        if stat.S_ISBLK(device.stat().st_mode):
            return device, "raw"
    except OSError:
        pass
    mount = req.ctx.mount_of(req.name)
    if not mount.is_dir():
        raise DiskFailure(f"{field}: claim {claim!r} is not mounted in the pod at {mount}")
    path = contained(str(mount / podlayout.PVC_DISK_FILE), (mount,), field=field)
    if not path.is_file():
        raise DiskFailure(
            f"{field}: claim {claim!r} holds no {podlayout.PVC_DISK_FILE} (an ephemeral "
            "volume only reads its claim's disk)"
        )
    return path, format_of(path)


async def resolve(req: VolumeRequest, source: EphemeralSource) -> ResolvedDisk:
    backing, fmt = _backing(req, source)
    overlay = req.ctx.work_dir / f"{req.name}-ephemeral.qcow2"
    if overlay.exists():
        return ResolvedDisk(path=overlay, format="qcow2")
    await run_tool(
        "qemu-img", "create", "-q", "-f", "qcow2", "-F", fmt, "-b", str(backing),
        str(overlay), what=f"creating the ephemeral overlay of volume {req.name!r}",
    )  # fmt: skip
    return ResolvedDisk(path=overlay, format="qcow2", created=(overlay,))
