"""The objects an export makes (bodies only, no I/O): the exporter pod, its Service, the
generated token Secret and the certificate Secret. Each is owned by the export, so the
garbage collector removes them with it.

The exporter runs `virt-exportserver-py` (exportserver/) from the launcher image, which
carries the whole kubevirt-py wheel; each claim is mounted read-only at
/export-volumes/<claim> (Filesystem) or appears as the device /export-volumes/<claim>
(Block).
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.export.certs import ExportCerts
from shared.launcherpod import LAUNCHER_GID
from shared.model.export import (
    APP,
    EXPORT_API_VERSION,
    READY_PATH,
    SERVER_PORT,
    SERVICE_LABEL,
    SERVICE_PORT,
    TOKEN_KEY,
    VirtualMachineExport,
    export_names,
)
from shared.naming import SUBDOMAIN, fit, label_value

APP_LABEL = "kubevirt.io"
CONTAINER = "exporter"
VOLUMES_DIR = "/export-volumes"
TOKEN_DIR = "/token"
CERT_DIR = "/cert"
BLOCK = "Block"
TOKEN_LENGTH = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """A claim to export and its volume mode; `memory_dump`: it holds a memory dump (its
    kubevirt.io/memory-dump annotation), served as an archive of its files."""

    name: str
    block: bool = False
    memory_dump: bool = False


def owner_ref(vme: VirtualMachineExport) -> dict[str, Any]:
    return {
        "apiVersion": EXPORT_API_VERSION,
        "kind": VirtualMachineExport.KIND,
        "name": vme.name,
        "uid": vme.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def is_owned(raw: Mapping[str, Any], vme: VirtualMachineExport) -> bool:
    """The object is controlled by this export (same UID)."""
    refs = (raw.get("metadata") or {}).get("ownerReferences") or ()
    return any(r.get("uid") == vme.uid and r.get("controller") for r in refs)


def selector_value(vme: VirtualMachineExport) -> str:
    return label_value(vme.name)


def _meta(vme: VirtualMachineExport, name: str, **labels: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": vme.namespace,
        "labels": {APP_LABEL: APP, **labels},
        "ownerReferences": [owner_ref(vme)],
    }


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def token_secret(vme: VirtualMachineExport, name: str) -> dict[str, Any]:
    """The token Secret made when spec.tokenSecretRef is unset: a random 20 characters."""
    token = secrets.token_urlsafe(TOKEN_LENGTH)[:TOKEN_LENGTH]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(vme, name),
        "type": "Opaque",
        "data": {TOKEN_KEY: _b64(token)},
    }


def cert_secret_name(vme: VirtualMachineExport) -> str:
    return fit(export_names(vme.name)[0], suffix="certs", limit=SUBDOMAIN)


def cert_secret(vme: VirtualMachineExport, certs: ExportCerts) -> dict[str, Any]:
    """kubernetes.io/tls: the serving pair and the CA the links publish."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(vme, cert_secret_name(vme)),
        "type": "kubernetes.io/tls",
        "data": {"tls.crt": _b64(certs.cert), "tls.key": _b64(certs.key), "ca.crt": _b64(certs.ca)},
    }


def service(vme: VirtualMachineExport) -> dict[str, Any]:
    """KubeVirt's: port 443 ("export") → the exporter's 8443."""
    name = export_names(vme.name)[1]
    port = {"name": "export", "protocol": "TCP", "port": SERVICE_PORT, "targetPort": SERVER_PORT}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(vme, name),
        "spec": {"ports": [port], "selector": {SERVICE_LABEL: selector_value(vme)}},
    }


def exporter_pod(
    vme: VirtualMachineExport,
    claims: Sequence[Claim],
    *,
    token_secret_name: str,
    image: str,
    pull_policy: str,
) -> dict[str, Any]:
    """The exporter pod serving `claims` (read-only) with the token and the certificate."""
    volumes: list[dict[str, Any]] = [
        {"name": "token", "secret": {"secretName": token_secret_name}},
        {"name": "certificates", "secret": {"secretName": cert_secret_name(vme)}},
    ]
    mounts = [
        {"name": "token", "mountPath": TOKEN_DIR, "readOnly": True},
        {"name": "certificates", "mountPath": CERT_DIR, "readOnly": True},
    ]
    devices: list[dict[str, Any]] = []
    for i, claim in enumerate(claims):
        vol = f"volume-{i}"
        source = {"claimName": claim.name, "readOnly": True}
        volumes.append({"name": vol, "persistentVolumeClaim": source})
        path = f"{VOLUMES_DIR}/{claim.name}"
        if claim.block:
            devices.append({"name": vol, "devicePath": path})
        else:
            mounts.append({"name": vol, "mountPath": path, "readOnly": True})
    container = _server(image=image, pull_policy=pull_policy, mounts=mounts)
    if devices:
        container["volumeDevices"] = devices
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(vme, export_names(vme.name)[0], **{SERVICE_LABEL: selector_value(vme)}),
        "spec": {
            "restartPolicy": "Always",
            # disk.img made by a launcher is its user's, 0660: read through its group
            "securityContext": {"supplementalGroups": [LAUNCHER_GID]},
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "containers": [container],
            "volumes": volumes,
        },
    }


def _server(*, image: str, pull_policy: str, mounts: list[dict[str, Any]]) -> dict[str, Any]:
    """The export server's container."""
    return {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": ["virt-exportserver-py"],
        "args": [
            f"--volumes-dir={VOLUMES_DIR}",
            f"--token-file={TOKEN_DIR}/{TOKEN_KEY}",
            f"--cert-dir={CERT_DIR}",
            f"--port={SERVER_PORT}",
        ],
        "ports": [{"name": "export", "containerPort": SERVER_PORT, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": READY_PATH, "port": SERVER_PORT, "scheme": "HTTPS"},
            "periodSeconds": 1,
            "failureThreshold": 3,
        },
        "resources": {"requests": {"cpu": "10m", "memory": "48Mi"}},
        # Root without capabilities: it opens disk.img or a device owned by root, nothing else.
        "securityContext": {
            "runAsUser": 0,
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": mounts,
    }
