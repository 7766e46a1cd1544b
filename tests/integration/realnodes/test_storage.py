"""Storage on real nodes: KubeVirt's vm-alpine-multipvc, vmi-pvc and vmi-host-disk examples
(examples/kubevirt, booting the tiny guest) run with the claims they name, bound by the real
kube-controller-manager/kube-scheduler to the cluster's local PersistentVolumes and mounted
by the real kubelet. The guest bumps a counter at the start of each disk and prints what it
found, so the console shows the data surviving a VM restart and a new VMI on the claim."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from shared.launcherpod import LAUNCHER_GID, LAUNCHER_UID
from tests.integration.realnodes.test_nonroot import _ids
from tests.integration.realnodes.test_story import REPO, _qemu_pids, _serial, _virtctl, _wait

pytestmark = pytest.mark.cluster
EXAMPLES = REPO / "examples" / "kubevirt"
GI = 1024**3


def _apply(k: Kubectl, ns: str, obj: dict[str, Any]) -> None:
    obj["metadata"]["namespace"] = ns
    k("apply", "-f", "-", stdin=json.dumps(obj))


def _example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    return data


def _claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "256Mi"}},
            "storageClassName": "local-storage",  # node-local PVs (the default class is CSI's)
        },
    }


def _get(k: Kubectl, ns: str, kind: str, name: str) -> dict[str, Any]:
    out = k("get", kind, name, "-n", ns, "-o", "json", check=False)
    return json.loads(out) if out else {}


def _running(k: Kubectl, ns: str, name: str, *, not_uid: str = "") -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        v = _get(k, ns, "vmi", name)
        ok = v.get("status", {}).get("phase") == "Running" and v["metadata"]["uid"] != not_uid
        return v if ok else None

    found: dict[str, Any] = _wait(
        probe, 300, f"VMI {name} Running", lambda: _get(k, ns, "vmi", name).get("status")
    )
    return found


def _disk_lines(cluster: Cluster, vmi: dict[str, Any], count: int) -> list[str]:
    def probe() -> list[str] | None:
        lines = re.findall(r"^KUBEVIRT-PY-DISK .*$", _serial(cluster, vmi), re.M)
        return [x.strip() for x in lines] if len(lines) >= count else None

    found: list[str] = _wait(
        probe, 240, "the guest's disk lines", lambda: _serial(cluster, vmi)[-600:]
    )
    return found


def test_pvc_and_host_disk_examples_on_real_nodes(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """vm-alpine-multipvc started before its claims exist: no pod, the VMI's Synchronized
    condition FailedPvcNotFound names the claim, the VM shows ErrorPvcNotFound. Claims
    created: bound to local PVs, disk.img made to the claim's size, the guest finds empty
    disks and writes them; restarted, the new guest finds what the first wrote. vmi-pvc on
    the same claim finds it too. vmi-host-disk (started with the claims) gets
    /var/data/disk.img made on its node, 1Gi sparse, and writes it: the image is the qemu
    user's (107) and its QEMU runs as 107, not root."""
    k, ns, kubeconfig = real_stack, real_namespace, real_cluster.kubeconfig
    _apply(k, ns, _example("vm-alpine-multipvc"))
    started = _virtctl(kubeconfig, ns, "start", "vm-alpine-multipvc")
    assert started.returncode == 0, started.stderr

    def pvc_not_found() -> dict[str, Any] | None:
        vmi = _get(k, ns, "vmi", "vm-alpine-multipvc")
        conds = vmi.get("status", {}).get("conditions", [])
        sync = [c for c in conds if c["type"] == "Synchronized"]
        return sync[0] if sync and sync[0].get("reason") == "FailedPvcNotFound" else None

    cond = _wait(pvc_not_found, 120, "FailedPvcNotFound")
    assert f"PVC {ns}/disk-alpine does not exist" in cond["message"]

    def vm_status() -> dict[str, Any]:
        status: dict[str, Any] = _get(k, ns, "vm", "vm-alpine-multipvc").get("status", {})
        return status

    _wait(lambda: vm_status().get("printableStatus") == "ErrorPvcNotFound", 60,
          "VM ErrorPvcNotFound", vm_status)  # fmt: skip
    assert json.loads(k("get", "pods", "-n", ns, "-o", "json"))["items"] == []

    for name in ("disk-alpine", "disk-custom"):
        _apply(k, ns, _claim(name))
    _apply(k, ns, _example("vmi-host-disk"))  # independent of the claims: boots meanwhile
    first = _running(k, ns, "vm-alpine-multipvc")
    assert _disk_lines(real_cluster, first, 2) == [
        "KUBEVIRT-PY-DISK vda ro=0 found=0 wrote=1",
        "KUBEVIRT-PY-DISK vdb ro=0 found=0 wrote=1",
    ]
    claim = _get(k, ns, "pvc", "disk-alpine")
    assert claim["status"]["phase"] == "Bound"
    pv = _get(k, ns, "pv", claim["spec"]["volumeName"])
    disk = Path(pv["spec"]["local"]["path"]) / "disk.img"
    # made when the pod was rendered, before the claim was bound (WaitForFirstConsumer):
    # to the claim's request
    assert disk.stat().st_size == 256 * 1024**2
    assert first["status"]["nodeName"] in pv["spec"]["local"]["path"]

    restarted = _virtctl(kubeconfig, ns, "restart", "vm-alpine-multipvc")
    assert restarted.returncode == 0, restarted.stderr
    second = _running(k, ns, "vm-alpine-multipvc", not_uid=first["metadata"]["uid"])
    assert _disk_lines(real_cluster, second, 2) == [
        "KUBEVIRT-PY-DISK vda ro=0 found=1 wrote=2",
        "KUBEVIRT-PY-DISK vdb ro=0 found=1 wrote=2",
    ]
    stopped = _virtctl(kubeconfig, ns, "stop", "vm-alpine-multipvc", "--wait", "--timeout", "180")
    assert stopped.returncode == 0, stopped.stderr

    _apply(k, ns, _example("vmi-pvc"))
    pvc_vmi = _running(k, ns, "vmi-pvc")
    assert _disk_lines(real_cluster, pvc_vmi, 1) == ["KUBEVIRT-PY-DISK vda ro=0 found=2 wrote=3"]

    host_vmi = _running(k, ns, "vmi-host-disk")
    assert _disk_lines(real_cluster, host_vmi, 1) == ["KUBEVIRT-PY-DISK vda ro=0 found=0 wrote=1"]
    node = host_vmi["status"]["nodeName"]
    host_file = real_cluster.config.nodes_dir / node / "var-data" / "disk.img"
    assert host_file.stat().st_size == GI
    assert host_file.read_bytes()[:13] == b"KVPY-COUNT 1\n"
    # Its launcher is not root: virt-handler handed the node directory to the qemu user,
    # the launcher made the image there, and QEMU writes it as 107.
    assert host_file.stat().st_uid == LAUNCHER_UID
    (qemu,) = _qemu_pids(f"{ns}_vmi-host-disk")
    assert _ids(qemu) == ([LAUNCHER_UID] * 4, [LAUNCHER_GID] * 4)
