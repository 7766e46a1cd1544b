"""sysprep: the ConfigMap or Secret as a pod volume the kubelet fills, mounted read-only at
`PRIVATE_DIR/sysprep/<volume>` (KubeVirt's sysprep source dir); the launcher makes the
answer-file CD-ROM of it. A missing object keeps the pod from starting (the kubelet's
rule), as in KubeVirt."""

from __future__ import annotations

from typing import Any

from controller.services.volumes.base import PodVolumes, RenderContext
from shared import podlayout
from shared.model import Volume
from shared.model.volumes import SysprepSource


def render(volume: Volume, source: SysprepSource, ctx: RenderContext) -> PodVolumes:
    """The object as a pod volume, mounted read-only."""
    del ctx
    name = volume.name or ""
    pod_volume = podlayout.pod_volume_name(name)
    pod_source: dict[str, Any]
    if source.secret is not None:
        pod_source = {"secret": {"secretName": source.secret.name or ""}}
    else:
        ref = source.config_map.name if source.config_map is not None else None
        pod_source = {"configMap": {"name": ref or ""}}
    mount = {
        "name": pod_volume,
        "mountPath": podlayout.config_mount_path(podlayout.SYSPREP_SUBDIR, name),
        "readOnly": True,
    }
    return PodVolumes(volumes=({"name": pod_volume, **pod_source},), mounts=(mount,))
