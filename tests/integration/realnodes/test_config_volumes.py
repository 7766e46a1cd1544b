"""Config volumes on real nodes: a VMI with a configMap, a secret and a serviceAccount
volume. The real kubelet mounts the objects into the launcher pod (the controller reads
none of them), the launcher makes ISOs of them, and the guest mounts each ISO and prints a
file of it on the console (kvpy.cat=), with the ISO's label."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_storage import _apply, _running
from tests.integration.realnodes.test_story import _serial, _wait

pytestmark = pytest.mark.cluster
GUEST_IMAGE = "registry.local/kubevirt-py/tiny-guest:v1"
CATS = "vda:/greeting,vdb:/password,vdc:/namespace"


def _vmi() -> dict[str, Any]:
    disks = [{"name": n, "disk": {"bus": "virtio"}} for n in ("cfg", "creds", "sa")]
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "vmi-config"},
        "spec": {
            "domain": {
                "devices": {"disks": disks},
                "firmware": {
                    "kernelBoot": {
                        "container": {
                            "image": GUEST_IMAGE,
                            "initrdPath": "/boot/initrd.img",
                            "kernelPath": "/boot/vmlinuz",
                        },
                        "kernelArgs": f"console=ttyS0 panic=-1 quiet kvpy.cat={CATS}",
                    }
                },
                "resources": {"requests": {"memory": "128Mi"}},
            },
            "terminationGracePeriodSeconds": 0,
            "volumes": [
                {"name": "cfg", "configMap": {"name": "app-config"}},
                {"name": "creds", "secret": {"secretName": "app-secret", "volumeLabel": "creds"}},
                {"name": "sa", "serviceAccount": {"serviceAccountName": "default"}},
            ],
        },
    }


def _cat(cluster: Cluster, vmi: dict[str, Any], what: str) -> tuple[str, str]:
    """The label and the text the guest printed for one kvpy.cat entry."""
    pattern = re.compile(
        rf"^KUBEVIRT-PY-CAT-BEGIN {re.escape(what)} label=(\S*)\r?\n(.*?)"
        rf"^KUBEVIRT-PY-CAT-END {re.escape(what)}",
        re.M | re.S,
    )

    def probe() -> tuple[str, str] | None:
        log = _serial(cluster, vmi)
        if f"KUBEVIRT-PY-CAT-FAILED {what}" in log:
            raise AssertionError(log[-800:])
        found = pattern.search(log)
        return (found.group(1), found.group(2).replace("\r", "")) if found else None

    result: tuple[str, str] = _wait(
        probe, 240, f"the guest's {what}", lambda: _serial(cluster, vmi)[-800:]
    )
    return result


def test_a_guest_reads_config_map_secret_and_service_account_isos(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """configMap → ISO labelled cfgdata holding its key; secret → ISO labelled with its
    volumeLabel holding the decoded value; serviceAccount → ISO holding the namespace
    (and token, ca.crt); the pod runs as the account and mounts no token elsewhere."""
    k, ns = real_stack, real_namespace
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "app-config"},
        "data": {"greeting": "hello from a configMap"},
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "app-secret"},
        "stringData": {"password": "s3cr3t-value"},
    }
    for obj in (config_map, secret, _vmi()):
        _apply(k, ns, obj)
    vmi = _running(k, ns, "vmi-config")
    assert _cat(real_cluster, vmi, "vda:/greeting") == ("cfgdata", "hello from a configMap\n")
    assert _cat(real_cluster, vmi, "vdb:/password") == ("creds", "s3cr3t-value\n")
    assert _cat(real_cluster, vmi, "vdc:/namespace") == ("cfgdata", f"{ns}\n")
    pods = json.loads(k("get", "pods", "-n", ns, "-o", "json"))["items"]
    assert [p["spec"]["serviceAccountName"] for p in pods] == ["default"]
