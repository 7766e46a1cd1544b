"""containerDisk and kernelBoot images as Kubernetes image volumes (``volumes[].image``):
the runtime mounts the image read-only in the launcher pod, unpacked once per node and
shared by every pod using it; nothing is copied (podlayout's IMAGE_VOLUMES_DIR layout).
The launcher's qcow2 overlay keeps the image's disk a read-only backing file."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from controller.services.volumes.base import PodVolumes
from shared import podlayout


def mounted(
    *,
    pod_volume: str,
    image: str,
    pull_policy: str | None,
    dir_of: str | None,
    pull_secret: str | None = None,
) -> PodVolumes:
    """The image as pod volume ``pod_volume``, mounted read-only at its image-volumes dir
    (``dir_of``: the containerDisk volume's name; None: kernelBoot's); ``pull_secret``
    goes to the pod's imagePullSecrets (the kubelet pulls image volumes with them)."""
    source: dict[str, Any] = {"reference": image}
    if pull_policy:
        source["pullPolicy"] = str(pull_policy)
    mount_path = PurePosixPath(podlayout.IMAGE_VOLUMES_DIR) / podlayout.image_volume_dir(dir_of)
    return PodVolumes(
        volumes=({"name": pod_volume, "image": source},),
        mounts=({"name": pod_volume, "mountPath": str(mount_path), "readOnly": True},),
        pull_secrets=(pull_secret,) if pull_secret else (),
    )
