"""A ``registry`` source pulled by the importer pod itself (CDI's ``pullMethod: pod``):
one init container runs ``virt-importer-py`` (importer/, in the launcher image) writing
the image's disk into scratch, where the importer script converts it as for the node's
pull. The secretRef's ``accessKeyId``/``secretKey`` reach it as environment variables
(secretKeyRef: the kubelet reads the Secret, the controller never does) and the
certConfigMap is mounted at ``/certs`` (shared/registrypull.py is the contract)."""

from __future__ import annotations

from typing import Any

from shared import podlayout
from shared.model.datavolume import DataVolumeSourceRegistry
from shared.registrypull import (
    ACCESS_KEY_ENV,
    ACCESS_KEY_ID,
    CERT_DIR,
    PULL_COMMAND,
    SECRET_KEY,
    SECRET_KEY_ENV,
)

PULL_CONTAINER = "registry-pull"
CERT_VOLUME = "cdi-cert-vol"


def pull_init(
    reg: DataVolumeSourceRegistry, *, image: str, pull_policy: str, source: str, out: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(init containers, volumes): the pull of ``source`` into ``out`` on the scratch
    (container-disks) volume, with the source's credentials and CAs."""
    args = ["--image", source, "--out", out]
    mounts: list[dict[str, Any]] = [
        {"name": podlayout.CONTAINER_DISKS_VOLUME, "mountPath": podlayout.CONTAINER_DISKS_DIR}
    ]
    volumes: list[dict[str, Any]] = [{"name": podlayout.CONTAINER_DISKS_VOLUME, "emptyDir": {}}]
    if reg.cert_config_map:
        args += ["--cert-dir", CERT_DIR]
        mounts.append({"name": CERT_VOLUME, "mountPath": CERT_DIR, "readOnly": True})
        volumes.append({"name": CERT_VOLUME, "configMap": {"name": reg.cert_config_map}})
    container: dict[str, Any] = {
        "name": PULL_CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": [PULL_COMMAND],
        "args": args,
        "volumeMounts": mounts,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if reg.secret_ref:
        container["env"] = [
            _secret_env(ACCESS_KEY_ENV, reg.secret_ref, ACCESS_KEY_ID),
            _secret_env(SECRET_KEY_ENV, reg.secret_ref, SECRET_KEY),
        ]
    return [container], volumes


def _secret_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
