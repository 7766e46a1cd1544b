"""Config volumes (configMap, secret, downwardAPI, serviceAccount): an ISO of the files the
kubelet put in the volume's mount (`PRIVATE_DIR/<kind dir>/<volume>`), rebuilt each start,
attached read-only. The label is the volume's volumeLabel, else KubeVirt's default
`cfgdata`; the kubelet's own entries (`..data`, `..<timestamp>`) are left out."""

from __future__ import annotations

from launcher.errors import DiskFailure
from launcher.volumes.base import ResolvedDisk, VolumeRequest
from launcher.volumes.iso import build_iso, graft
from shared import podlayout
from shared.model.volumes import (
    ConfigMapSource,
    ConfigSource,
    DownwardAPISource,
    SecretSource,
    ServiceAccountSource,
)

DEFAULT_LABEL = "cfgdata"
# (field name, pod layout dir, ISO file suffix) per source type.
KINDS: dict[type[ConfigSource], tuple[str, str]] = {
    ConfigMapSource: ("configMap", podlayout.CONFIG_MAP_SUBDIR),
    SecretSource: ("secret", podlayout.SECRET_SUBDIR),
    DownwardAPISource: ("downwardAPI", podlayout.DOWNWARD_API_SUBDIR),
    ServiceAccountSource: ("serviceAccount", podlayout.SERVICE_ACCOUNT_SUBDIR),
}


def label_of(source: ConfigSource) -> str:
    """The ISO's volume label."""
    label = None if isinstance(source, ServiceAccountSource) else source.volume_label
    return label or DEFAULT_LABEL


async def resolve(req: VolumeRequest, source: ConfigSource) -> ResolvedDisk:
    key, subdir = KINDS[type(source)]
    mount = req.ctx.config_mount_of(subdir, req.name)
    if not mount.is_dir():
        raise DiskFailure(f"{req.field}.{key}: the pod has no mount of it at {mount}")
    entries = sorted(p for p in mount.iterdir() if not p.name.startswith(".."))
    empty = req.ctx.work_dir / "empty-iso-root"
    empty.mkdir(exist_ok=True)
    iso = await build_iso(
        req.ctx.work_dir / f"{req.name}-{subdir}.iso",
        label=label_of(source),
        root=empty,
        grafts=[graft(p.name, p) for p in entries],
        what=f"building the {key} ISO of volume {req.name!r}",
    )
    return ResolvedDisk(path=iso, format="raw", readonly=True)
