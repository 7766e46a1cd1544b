"""cloudInitNoCloud and cloudInitConfigDrive: inline data needs nothing of the pod; a
secretRef (networkDataSecretRef) is the Secret as a pod volume mounted read-only at
`PRIVATE_DIR/secret/<volume>-udata` (`-ndata`), KubeVirt's layout; the launcher reads its
key userdata or userData (networkdata or networkData)."""

from __future__ import annotations

from controller.services.volumes.base import PodVolumes, RenderContext
from shared import podlayout
from shared.model import Volume
from shared.model.volumes import CloudInitNoCloudSource, LocalObjectReference


def _secret(volume: str, suffix: str, ref: LocalObjectReference) -> PodVolumes:
    pod_volume = podlayout.derived_volume_name(volume, suffix)
    mount = {
        "name": pod_volume,
        "mountPath": podlayout.config_mount_path(podlayout.SECRET_SUBDIR, volume + suffix),
        "readOnly": True,
    }
    secret = {"secretName": ref.name or ""}
    return PodVolumes(volumes=({"name": pod_volume, "secret": secret},), mounts=(mount,))


def render(volume: Volume, source: CloudInitNoCloudSource, ctx: RenderContext) -> PodVolumes:
    """The Secrets the cloud-init volume names (none for inline data). Serves
    cloudInitConfigDrive too (same fields)."""
    del ctx
    name = volume.name or ""
    parts = []
    if source.user_data_secret_ref is not None:
        parts.append(_secret(name, podlayout.USER_DATA_SUFFIX, source.user_data_secret_ref))
    if source.network_data_secret_ref is not None:
        parts.append(_secret(name, podlayout.NETWORK_DATA_SUFFIX, source.network_data_secret_ref))
    return PodVolumes.merged(parts)
