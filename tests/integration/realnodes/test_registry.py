"""Images from the test bed's private registry (localkube/registry.py: distribution over
HTTPS with a cluster-CA certificate and htpasswd, the test guest pushed at start; every
node's containerd trusts the CA, and holds no credentials).

One test, everything started at once: a VMI whose containerDisk and kernelBoot images come
from the registry with a pull secret runs; one with a wrong pull secret (pullPolicy Always,
so the node cannot answer from its cache) is held with the kubelet's reason on its
Synchronized condition; a registry DataVolume with pullMethod pod, a secretRef and a
certConfigMap is imported by the importer pod itself; one with a wrong password Fails
saying why; one without a pullMethod is the importer's pull too (CDI's default)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localkube import registry
from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_datavolumes import _dv, _final, _ready_message
from tests.integration.realnodes.test_storage import _apply, _get, _running
from tests.integration.realnodes.test_story import _wait

pytestmark = pytest.mark.cluster
PULL_REASONS = ("ErrImagePull", "ImagePullBackOff")


def _pull_secret(name: str, ep: registry.RegistryEndpoint, *, password: str) -> dict[str, Any]:
    config = registry.RegistryEndpoint(
        host=ep.host, username=ep.username, password=password, ca_file=ep.ca_file
    ).docker_config()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": json.dumps(config)},
    }


def _access_secret(name: str, user: str, password: str) -> dict[str, Any]:
    """CDI's registry credentials: accessKeyId (user) and secretKey (password)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "stringData": {"accessKeyId": user, "secretKey": password},
    }


def _guest(name: str, image: str, secret: str, *, policy: str | None = None) -> dict[str, Any]:
    """The tiny guest: containerDisk and kernelBoot both from `image`, pulled with `secret`."""
    disk: dict[str, Any] = {"image": image, "imagePullSecret": secret}
    if policy:
        disk["imagePullPolicy"] = policy
    kernel = {
        "image": image,
        "imagePullSecret": secret,
        "kernelPath": "/boot/vmlinuz",
        "initrdPath": "/boot/initrd.img",
    }
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": name},
        "spec": {
            "domain": {
                "devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]},
                "firmware": {
                    "kernelBoot": {"container": kernel, "kernelArgs": "console=ttyS0 quiet"}
                },
                "resources": {"requests": {"memory": "128Mi"}},
            },
            "terminationGracePeriodSeconds": 0,
            "volumes": [{"name": "root", "containerDisk": disk}],
        },
    }


def _refused(k: Kubectl, ns: str, name: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        conds = _get(k, ns, "vmi", name).get("status", {}).get("conditions", [])
        sync = [c for c in conds if c["type"] == "Synchronized" and c["status"] == "False"]
        return sync[0] if sync and sync[0].get("reason") in PULL_REASONS else None

    found: dict[str, Any] = _wait(
        probe, 180, f"VMI {name} refused its image", lambda: _get(k, ns, "vmi", name).get("status")
    )
    return found


def test_pull_secrets_and_registry_datavolumes_with_the_private_registry(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A pull secret gets the VMI Running from the private registry; a wrong one leaves the
    VMI Scheduling with Synchronized=False, ErrImagePull/ImagePullBackOff, naming
    spec.volumes[0].containerDisk.image and the image; pullMethod pod with secretRef and
    certConfigMap Succeeds; a wrong secretKey Fails with the registry's 401; no pullMethod
    and no certConfigMap Fails verifying the registry's certificate: the importer pod
    pulled (CDI's default), not the node, whose containerd trusts the cluster CA."""
    k, ns = real_stack, real_namespace
    ep = registry.endpoint(real_cluster.config, real_cluster.fleet().plan)
    image = ep.image()
    _apply(k, ns, _pull_secret("regcred", ep, password=ep.password))
    _apply(k, ns, _pull_secret("badcred", ep, password="not-the-password"))
    _apply(k, ns, _access_secret("reg-auth", ep.username, ep.password))
    _apply(k, ns, _access_secret("reg-bad", ep.username, "not-the-password"))
    ca = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "reg-ca"},
          "data": {"ca.crt": ep.ca_file.read_text()}}  # fmt: skip
    _apply(k, ns, ca)
    _apply(k, ns, _guest("pulled", image, "regcred"))
    _apply(k, ns, _guest("refused", image, "badcred", policy="Always"))
    source = {"url": f"docker://{image}", "pullMethod": "pod", "certConfigMap": "reg-ca"}
    _apply(k, ns, _dv("regdv", {"registry": {**source, "secretRef": "reg-auth"}}))
    _apply(k, ns, _dv("regdv-bad", {"registry": {**source, "secretRef": "reg-bad"}}))
    _apply(k, ns, _dv("regdv-default", {"registry": {"url": f"docker://{image}"}}))

    running = _running(k, ns, "pulled")
    launcher = json.loads(k("get", "pods", "-n", ns, "-l", "kubevirt.io/created-by="
                            + running["metadata"]["uid"], "-o", "json"))["items"]  # fmt: skip
    assert [p["spec"].get("imagePullSecrets") for p in launcher] == [[{"name": "regcred"}]]

    sync = _refused(k, ns, "refused")
    assert sync["message"].startswith(f"spec.volumes[0].containerDisk.image: image {image!r}")
    assert _get(k, ns, "vmi", "refused")["status"]["phase"] == "Scheduling"

    dv = _final(k, ns, "regdv")
    assert dv["status"]["phase"] == "Succeeded", _ready_message(dv)
    assert _get(k, ns, "pvc", "regdv")["status"]["phase"] == "Bound"
    bad = _final(k, ns, "regdv-bad")
    assert bad["status"]["phase"] == "Failed"
    why = _ready_message(bad)
    assert "the source image cannot be pulled" in why and "HTTP 401" in why, why
    default = _final(k, ns, "regdv-default")
    assert default["status"]["phase"] == "Failed"
    assert "certificate verify failed" in _ready_message(default), _ready_message(default)
