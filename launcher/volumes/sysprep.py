"""sysprep: an ISO labelled `unattendCD` (KubeVirt's label) of the files the kubelet put in
the volume's mount (`PRIVATE_DIR/sysprep/<volume>`), rebuilt each start and attached
read-only. Windows setup looks for autounattend.xml (or unattend.xml) on removable drives:
a volume holding neither fails the start, naming the volume (KubeVirt's rule)."""

from __future__ import annotations

from launcher.errors import DiskFailure
from launcher.volumes.base import ResolvedDisk, VolumeRequest
from launcher.volumes.iso import build_iso, graft
from shared import podlayout
from shared.model.volumes import SysprepSource

LABEL = "unattendCD"
ANSWER_FILES = ("autounattend.xml", "unattend.xml")


async def resolve(req: VolumeRequest, source: SysprepSource) -> ResolvedDisk:
    key = "configMap" if source.config_map is not None else "secret"
    field = f"{req.field}.sysprep.{key}"
    mount = req.ctx.config_mount_of(podlayout.SYSPREP_SUBDIR, req.name)
    if not mount.is_dir():
        raise DiskFailure(f"{field}: the pod has no mount of it at {mount}")
    entries = sorted(p for p in mount.iterdir() if not p.name.startswith(".."))
    if not any(p.name.lower() in ANSWER_FILES for p in entries):
        raise DiskFailure(
            f"{field}: the sysprep volume {req.name!r} holds neither {' nor '.join(ANSWER_FILES)}"
        )
    empty = req.ctx.work_dir / "empty-iso-root"
    empty.mkdir(exist_ok=True)
    iso = await build_iso(
        req.ctx.work_dir / f"{req.name}-sysprep.iso",
        label=LABEL,
        root=empty,
        grafts=[graft(p.name, p) for p in entries],
        what=f"building the sysprep ISO of volume {req.name!r}",
    )
    return ResolvedDisk(path=iso, format="raw", readonly=True)
