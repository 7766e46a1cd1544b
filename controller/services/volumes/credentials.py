"""spec.accessCredentials: each Secret named, once, as a pod volume mounted read-only at
`PRIVATE_DIR/secret/<secretName>-access-cred` (KubeVirt's layout). The launcher reads the
keys there: at start for noCloud / configDrive, and again whenever the kubelet refreshes
the files for qemuGuestAgent (the kubelet updates mounted Secrets in place; KubeVirt's
launcher watches them the same way)."""

from __future__ import annotations

from controller.services.volumes.base import PodVolumes
from shared import podlayout
from shared.model import VirtualMachineInstance
from shared.model.credentials import secret_names


def render(vmi: VirtualMachineInstance) -> PodVolumes:
    """The access credentials' Secrets as pod volumes and compute-container mounts."""
    parts = []
    for name in secret_names(vmi.spec.access_credentials):
        pod_volume = podlayout.derived_volume_name(name, podlayout.ACCESS_CRED_SUFFIX)
        mount = {
            "name": pod_volume,
            "mountPath": podlayout.config_mount_path(
                podlayout.SECRET_SUBDIR, name + podlayout.ACCESS_CRED_SUFFIX
            ),
            "readOnly": True,
        }
        volume = {"name": pod_volume, "secret": {"secretName": name}}
        parts.append(PodVolumes(volumes=(volume,), mounts=(mount,)))
    return PodVolumes.merged(parts)
