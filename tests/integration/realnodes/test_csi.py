"""The local cluster's CSI stack on real nodes (localkube/csi): claims of the default
StorageClass provisioned by Kubernetes' own csi-provisioner against the project's test-bed
driver, mounted by the real kubelets (which the driver registered with itself); block
claims as block devices in pods; clones; VolumeSnapshots through the snapshot-controller
and csi-snapshotter, restored into new claims; expansion. Everything through kubectl."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localkube.csi.service import DRIVER
from localkube.csi.stack import SNAPSHOT_CLASS, STORAGE_CLASS
from localkube.deploy import Kubectl
from shared.model.quantity import parse_bytes
from tests.integration.realnodes.test_story import _wait

pytestmark = pytest.mark.cluster
IMAGE = "registry.local/kubevirt-py/virt-controller:dev"  # has python3
MI = 1 << 20
WRITE = """
import pathlib, sys
pathlib.Path("/data/note").write_text(sys.argv[1]); print("wrote", sys.argv[1])
"""
READ = """
import pathlib
print("read", pathlib.Path("/data/note").read_text())
"""
BLOCK = """
import os, stat, sys, time
dev, want = "/dev/xvda", int(sys.argv[1])
assert stat.S_ISBLK(os.stat(dev).st_mode), "not a block device"
fd = os.open(dev, os.O_RDWR)
os.pwrite(fd, b"block!", 0); os.fsync(fd)
print("size", os.lseek(fd, 0, os.SEEK_END), "head", os.pread(fd, 6, 0).decode(), flush=True)
for _ in range(1500):  # expansion: the device grows under the running pod
    size = os.lseek(fd, 0, os.SEEK_END)
    if size >= want:
        print("grown", size, flush=True); sys.exit(0)
    time.sleep(0.2)
sys.exit("device stayed at %d bytes" % size)
"""


def _get(k: Kubectl, ns: str, kind: str, name: str) -> dict[str, Any]:
    out = k("get", kind, name, "-n", ns, "-o", "json", check=False)
    return json.loads(out) if out else {}


def _size(capacity: dict[str, str]) -> int:
    return parse_bytes(capacity["storage"])


def _apply(k: Kubectl, ns: str, obj: dict[str, Any]) -> None:
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(obj))


def _claim(
    name: str, size: str, *, block: bool = False, mode: str = "ReadWriteOnce",
    source: dict[str, str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    spec: dict[str, Any] = {"accessModes": [mode], "resources": {"requests": {"storage": size}}}
    if block:
        spec["volumeMode"] = "Block"
    if source:
        spec["dataSource"] = source
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": spec}  # fmt: skip


def _bound(k: Kubectl, ns: str, name: str) -> dict[str, Any]:
    """The claim once Bound, and its PV."""
    claim = _wait(
        lambda: (c := _get(k, ns, "pvc", name)).get("status", {}).get("phase") == "Bound" and c,
        120,
        f"claim {name} Bound ({_events(k, ns)})",
    )
    return claim  # type: ignore[no-any-return]


def _events(k: Kubectl, ns: str) -> str:
    return k("get", "events", "-n", ns, "-o", "custom-columns=R:.reason,M:.message", check=False)[
        -1500:
    ]


def _run(
    k: Kubectl, ns: str, name: str, *, claim: str, code: str, args: tuple[str, ...] = (),
    node: str = "node01", block: bool = False, wait: bool = True,
) -> str:  # fmt: skip
    """A pod running `code` on `node` with the claim at /data (or /dev/xvda); its logs."""
    container: dict[str, Any] = {
        "name": "main", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-c", code, *args], "securityContext": {"runAsUser": 0},
    }  # fmt: skip
    if block:
        container["volumeDevices"] = [{"name": "v", "devicePath": "/dev/xvda"}]
    else:
        container["volumeMounts"] = [{"name": "v", "mountPath": "/data"}]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"nodeName": node, "restartPolicy": "Never", "containers": [container],
                    "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]}}  # fmt: skip
    _apply(k, ns, pod)
    if not wait:
        return ""
    return _finished(k, ns, name)


def _finished(k: Kubectl, ns: str, name: str) -> str:
    def done() -> str:
        return str(_get(k, ns, "pod", name).get("status", {}).get("phase", ""))

    phase = _wait(lambda: done() in ("Succeeded", "Failed") and done(), 180,
                  f"pod {name} to finish ({_events(k, ns)})")  # fmt: skip
    logs = k("logs", "-n", ns, name, check=False)
    assert phase == "Succeeded", f"pod {name} {phase}: {logs}\n{_events(k, ns)}"
    return logs


def test_default_class_claim_is_provisioned_and_shared_by_both_nodes(
    real_kubectl: Kubectl, real_namespace: str
) -> None:
    """A claim naming no class gets the default csi-local, is provisioned by the driver
    (a CSI PV of its size) and is Bound; a pod on node01 writes it, a pod on node02 reads
    the same data (ReadWriteMany: the volumes live on one host directory both nodes see)."""
    k, ns = real_kubectl, real_namespace
    _apply(k, ns, _claim("fs", "64Mi", mode="ReadWriteMany"))
    claim = _bound(k, ns, "fs")
    assert claim["spec"]["storageClassName"] == STORAGE_CLASS
    pv = _get(k, "", "pv", claim["spec"]["volumeName"])
    assert pv["spec"]["csi"]["driver"] == DRIVER
    assert parse_bytes(pv["spec"]["capacity"]["storage"]) == 64 * MI
    assert "wrote hello" in _run(k, ns, "w", claim="fs", code=WRITE, args=("hello",))
    assert "read hello" in _run(k, ns, "r", claim="fs", code=READ, node="node02")


def test_block_claim_is_a_block_device_that_grows_online(
    real_kubectl: Kubectl, real_namespace: str
) -> None:
    """A volumeMode Block claim appears in the pod as a block device of the claim's size
    that keeps what is written; grown to 64Mi while the pod runs, the PV is resized by
    ControllerExpandVolume, the kubelet's NodeExpandVolume refreshes the node's loop device
    and the running pod sees 64Mi; the claim's status says 64Mi."""
    k, ns = real_kubectl, real_namespace
    _apply(k, ns, _claim("blk", "32Mi", block=True))
    claim = _bound(k, ns, "blk")
    assert claim["spec"]["volumeMode"] == "Block"
    _run(k, ns, "dev", claim="blk", code=BLOCK, args=(str(64 * MI),), block=True, wait=False)
    _wait(lambda: "head block!" in k("logs", "-n", ns, "dev", check=False), 180,
          f"the pod to write its device ({_events(k, ns)})")  # fmt: skip
    assert f"size {32 * MI}" in k("logs", "-n", ns, "dev")
    k("patch", "pvc", "blk", "-n", ns, "--type=merge",
      "-p", json.dumps({"spec": {"resources": {"requests": {"storage": "64Mi"}}}}))  # fmt: skip
    logs = _finished(k, ns, "dev")  # the kubelet picks the new size up at its next pod sync
    assert f"grown {64 * MI}" in logs
    pv = _get(k, "", "pv", claim["spec"]["volumeName"])
    assert parse_bytes(pv["spec"]["capacity"]["storage"]) == 64 * MI
    _wait(lambda: _size(_get(k, ns, "pvc", "blk")["status"]["capacity"]) == 64 * MI,
          60, "the claim's status capacity at 64Mi")  # fmt: skip


def test_filesystem_claim_expands(real_kubectl: Kubectl, real_namespace: str) -> None:
    """A filesystem claim asked for more gets a PV and a claim status of the new size
    (no node step for a directory volume)."""
    k, ns = real_kubectl, real_namespace
    _apply(k, ns, _claim("grow", "64Mi"))
    claim = _bound(k, ns, "grow")
    k("patch", "pvc", "grow", "-n", ns, "--type=merge",
      "-p", json.dumps({"spec": {"resources": {"requests": {"storage": "128Mi"}}}}))  # fmt: skip
    _wait(lambda: _size(_get(k, "", "pv", claim["spec"]["volumeName"])["spec"]["capacity"])
          == 128 * MI, 60, "the PV at 128Mi")  # fmt: skip
    _wait(lambda: _size(_get(k, ns, "pvc", "grow")["status"]["capacity"]) == 128 * MI,
          60, "the claim's status capacity at 128Mi")  # fmt: skip


def test_clone_of_a_claim_has_its_data(real_kubectl: Kubectl, real_namespace: str) -> None:
    """A claim whose dataSource is another claim is provisioned with the source's data."""
    k, ns = real_kubectl, real_namespace
    _apply(k, ns, _claim("src", "64Mi"))
    _bound(k, ns, "src")
    _run(k, ns, "w", claim="src", code=WRITE, args=("cloned",))
    _apply(k, ns, _claim("copy", "64Mi", source={"kind": "PersistentVolumeClaim", "name": "src"}))
    _bound(k, ns, "copy")
    assert "read cloned" in _run(k, ns, "r", claim="copy", code=READ, node="node02")


def test_snapshot_restores_the_data_of_its_time(real_kubectl: Kubectl, real_namespace: str) -> None:
    """A VolumeSnapshot of the default VolumeSnapshotClass becomes readyToUse; the claim is
    written again afterwards; a claim restored from the snapshot has the data as it was
    when the snapshot was taken."""
    k, ns = real_kubectl, real_namespace
    _apply(k, ns, _claim("orig", "64Mi"))
    _bound(k, ns, "orig")
    _run(k, ns, "w1", claim="orig", code=WRITE, args=("before",))
    snap = {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
            "metadata": {"name": "snap"},
            "spec": {"source": {"persistentVolumeClaimName": "orig"}}}  # fmt: skip
    _apply(k, ns, snap)
    ready = _wait(
        lambda: (
            (s := _get(k, ns, "volumesnapshot", "snap")).get("status", {}).get("readyToUse") and s
        ),
        120,
        f"the snapshot readyToUse ({_events(k, ns)})",
    )
    assert ready["spec"]["volumeSnapshotClassName"] == SNAPSHOT_CLASS
    _run(k, ns, "w2", claim="orig", code=WRITE, args=("after",))
    source = {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "snap"}
    _apply(k, ns, _claim("restored", "64Mi", source=source))
    _bound(k, ns, "restored")
    assert "read before" in _run(k, ns, "r", claim="restored", code=READ)
