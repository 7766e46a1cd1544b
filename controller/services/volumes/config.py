"""Config volumes (configMap, secret, downwardAPI, serviceAccount): the object as a pod
volume the kubelet fills, mounted read-only in the compute container at
`PRIVATE_DIR/<kind dir>/<volume>` (KubeVirt's layout); the launcher makes an ISO of it.

The controller never reads the objects: the kubelet mounts them, so it needs no access to
Secrets. A missing object that is not `optional` keeps the pod from starting (the kubelet's
rule), as in KubeVirt.
"""

from __future__ import annotations

from typing import Any

from controller.services.volumes.base import PodVolumes, RenderContext
from shared import podlayout
from shared.model import Volume
from shared.model.volumes import (
    ConfigMapSource,
    DownwardAPISource,
    SecretSource,
    ServiceAccountSource,
)

# What the kubelet's service-account automount holds: the token (for the API server's
# audience, an hour, refreshed by the kubelet), the cluster's CA and the namespace.
TOKEN_SECONDS = 3607
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"


def _mounted(volume: Volume, kind_subdir: str, source: dict[str, Any]) -> PodVolumes:
    name = volume.name or ""
    pod_volume = podlayout.pod_volume_name(name)
    mount = {
        "name": pod_volume,
        "mountPath": podlayout.config_mount_path(kind_subdir, name),
        "readOnly": True,
    }
    return PodVolumes(volumes=({"name": pod_volume, **source},), mounts=(mount,))


def _object_ref(key: str, name: str | None, *, optional: bool | None) -> dict[str, Any]:
    """A configMap or secret volume source: the object's name under `key`, and `optional`
    when the VMI sets it."""
    ref: dict[str, Any] = {key: name or ""}
    if optional is not None:
        ref["optional"] = optional
    return ref


def render_config_map(volume: Volume, source: ConfigMapSource, ctx: RenderContext) -> PodVolumes:
    """The ConfigMap as a pod volume."""
    del ctx
    ref = _object_ref("name", source.name, optional=source.optional)
    return _mounted(volume, podlayout.CONFIG_MAP_SUBDIR, {"configMap": ref})


def render_secret(volume: Volume, source: SecretSource, ctx: RenderContext) -> PodVolumes:
    """The Secret as a pod volume."""
    del ctx
    ref = _object_ref("secretName", source.secret_name, optional=source.optional)
    return _mounted(volume, podlayout.SECRET_SUBDIR, {"secret": ref})


def render_downward_api(
    volume: Volume, source: DownwardAPISource, ctx: RenderContext
) -> PodVolumes:
    """The fields as a downwardAPI pod volume (of the launcher pod, which carries the
    VMI's labels and annotations)."""
    del ctx
    items = [item.to_dict() for item in source.fields]
    return _mounted(volume, podlayout.DOWNWARD_API_SUBDIR, {"downwardAPI": {"items": items}})


def render_service_account(
    volume: Volume, source: ServiceAccountSource, ctx: RenderContext
) -> PodVolumes:
    """The pod runs as the account; its token, ca.crt and namespace as a projected volume
    (what the automount would give every container, here the compute container only)."""
    del ctx
    projected = {
        "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_SECONDS}},
            {
                "configMap": {
                    "name": ROOT_CA_CONFIGMAP,
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
            {
                "downwardAPI": {
                    "items": [
                        {
                            "path": "namespace",
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                        }
                    ]
                }
            },
        ]
    }
    part = _mounted(volume, podlayout.SERVICE_ACCOUNT_SUBDIR, {"projected": projected})
    return PodVolumes(
        volumes=part.volumes,
        mounts=part.mounts,
        service_account_name=source.service_account_name,
    )
