"""persistentVolumeClaim (filesystem mode), hotplugged: the claim's `disk.img` as its
attachment pod's kubelet mount holds it on this node, made sparse to the claim's capacity
when absent (as a claim booted with gets it from the launcher), and owned by the
launchers' user (shared.launcherpod.LAUNCHER_UID).

The kubelet mounts a pod's claim under `pods/<uid>/volumes/<plugin>/<pv name>` (plus
`/mount` for CSI drivers). An attachment pod has the claim as its only volume, so the
one such directory outside the kubelet's own volume kinds is the claim's.
"""

from __future__ import annotations

import os
from pathlib import Path

from handler.errors import HandlerError
from shared import podlayout
from shared.launcherpod import LAUNCHER_GID, LAUNCHER_UID
from shared.model.errors import QuantityError
from shared.model.quantity import parse_bytes
from shared.model.volumes import PersistentVolumeClaimSource
from shared.model.volumestatus import VolumeStatus

# Volume kinds the kubelet gives a pod that are never a claim.
NOT_CLAIMS = frozenset(
    {
        "kubernetes.io~empty-dir",
        "kubernetes.io~projected",
        "kubernetes.io~secret",
        "kubernetes.io~configmap",
        "kubernetes.io~downward-api",
    }
)
SECTOR = 512


class ClaimNotMounted(HandlerError):
    """The attachment pod's claim is not (or no longer) on this node."""


def disk_source(
    source: PersistentVolumeClaimSource, entry: VolumeStatus, *, pods_dir: Path
) -> Path:
    """The claim's disk file on this node, made when absent."""
    claim = source.claim_name or ""
    disk = claim_root(claim, entry, pods_dir=pods_dir) / podlayout.PVC_DISK_FILE
    if not disk.exists():
        _make_sparse(disk, _capacity(entry, claim))
    if not disk.is_file():
        raise ClaimNotMounted(f"claim {claim!r}: {podlayout.PVC_DISK_FILE} is no file")
    hand_over(disk)
    return disk


def claim_root(claim: str, entry: VolumeStatus, *, pods_dir: Path) -> Path:
    """The directory of the claim's filesystem, as the attachment pod's kubelet mount holds
    it on this node."""
    pod_uid = entry.attach_pod_uid or ""
    volumes = pods_dir / pod_uid / podlayout.POD_VOLUMES
    found = claim_dirs(volumes)
    if len(found) != 1:
        raise ClaimNotMounted(
            f"claim {claim!r} is not mounted for attachment pod {pod_uid} on this node "
            f"({len(found)} volume dirs under {volumes})"
        )
    return found[0]


def claim_dirs(volumes: Path) -> list[Path]:
    """The claim directories among a pod's volumes on this node (the kubelet's own volume
    kinds left out; a CSI volume's `mount/`): one for a pod whose only volume is a claim
    (an attachment pod, a backup's target pod)."""
    found = [
        d
        for kind in (sorted(volumes.iterdir()) if volumes.is_dir() else [])
        if kind.name not in NOT_CLAIMS
        for d in sorted(kind.iterdir())
        if d.is_dir()
    ]
    return [d / "mount" if (d / "mount").is_dir() else d for d in found]


def hand_over(disk: Path) -> None:
    """The disk file owned by the launchers' user, read-writable by it (KubeVirt's handler
    does the same): a non-root QEMU opens it through the hotplug bind mount."""
    if os.geteuid() != 0:
        return
    st = disk.stat()
    if (st.st_uid, st.st_gid) != (LAUNCHER_UID, LAUNCHER_GID):
        os.chown(disk, LAUNCHER_UID, LAUNCHER_GID)
    if st.st_mode & 0o660 != 0o660:
        disk.chmod(st.st_mode | 0o660)


def _capacity(entry: VolumeStatus, claim: str) -> int:
    info = entry.persistent_volume_claim_info
    raw = (info.capacity.get("storage") or info.requests.get("storage")) if info else None
    try:
        size = parse_bytes(raw) if raw else 0
    except QuantityError:
        size = 0
    if size < SECTOR:
        raise ClaimNotMounted(
            f"claim {claim!r} holds no {podlayout.PVC_DISK_FILE} and its capacity is unknown"
        )
    return size - size % SECTOR


def _make_sparse(path: Path, size: int) -> None:
    part = path.with_name(f".{path.name}.part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o660)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)
    part.rename(path)
