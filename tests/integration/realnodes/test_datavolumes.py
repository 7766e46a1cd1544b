"""DataVolumes on real nodes: CDI's API served by kubevirt-py's DataVolume controller, the
claims bound by the real kube-controller-manager/kube-scheduler to the cluster's storage,
the importer pods run by the real kubelets (qemu-img in the launcher image).

The test guest's containerDisk (registry.local/kubevirt-py/tiny-guest:v1, /disk/disk.qcow2,
16 MiB virtual) is the image imported; the guest boots with kernelBoot from the same image
and bumps a counter at the start of its vda, printing what it found, so the console shows
the imported disk attached and its data surviving a restart."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_storage import _apply, _disk_lines, _get, _running
from tests.integration.realnodes.test_story import _virtctl, _wait

pytestmark = pytest.mark.cluster
GUEST_IMAGE = "registry.local/kubevirt-py/tiny-guest:v1"
LAUNCHER_IMAGE = "registry.local/kubevirt-py/virt-launcher:dev"
GUEST_VIRTUAL_SIZE = 16 * 1024**2
FINAL = ("Succeeded", "Failed")
LOCAL_STORAGE = "local-storage"  # hand-made local PVs: no CSI driver, so clones are copied
# The HTTP server's files: the guest's disk, and a text file that is no disk image.
SERVE_FILES = "/bin-dir/busybox cp /disk/disk.qcow2 /srv/ && echo hello >/srv/notes.txt"


def _dv(name: str, source: dict[str, Any], size: str = "64Mi") -> dict[str, Any]:
    return {
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataVolume",
        "metadata": {"name": name},
        "spec": {"source": source, "storage": {"resources": {"requests": {"storage": size}}}},
    }


def _guest_spec(volume: dict[str, Any]) -> dict[str, Any]:
    """The tiny guest, kernelBoot from its image, with `volume` as its vda."""
    return {
        "domain": {
            "devices": {"disks": [{"name": "data", "disk": {"bus": "virtio"}}]},
            "firmware": {
                "kernelBoot": {
                    "container": {
                        "image": GUEST_IMAGE,
                        "kernelPath": "/boot/vmlinuz",
                        "initrdPath": "/boot/initrd.img",
                    },
                    "kernelArgs": "console=ttyS0 panic=-1 quiet kvpy.disk=vda",
                }
            },
            "resources": {"requests": {"memory": "128Mi"}},
        },
        "terminationGracePeriodSeconds": 0,
        "volumes": [{"name": "data", **volume}],
    }


def _vmi(name: str, dv: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": name},
        "spec": _guest_spec({"dataVolume": {"name": dv}}),
    }


def _final(k: Kubectl, ns: str, name: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        dv = _get(k, ns, "dv", name)
        return dv if dv.get("status", {}).get("phase") in FINAL else None

    found: dict[str, Any] = _wait(
        probe, 300, f"DataVolume {name} final", lambda: _get(k, ns, "dv", name).get("status")
    )
    return found


def _ready_message(dv: dict[str, Any]) -> str:
    conds = dv.get("status", {}).get("conditions", [])
    return next((c.get("message") or "" for c in conds if c["type"] == "Ready"), "")


def _counter(line: str) -> tuple[int, int]:
    m = re.fullmatch(r"KUBEVIRT-PY-DISK vda ro=0 found=(\d+) wrote=(\d+)", line)
    assert m is not None, line
    return int(m.group(1)), int(m.group(2))


def test_vm_from_datavolume_template_imports_boots_and_keeps_data(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A VM whose dataVolumeTemplates import the guest's containerDisk (registry source,
    pullMethod node): the DataVolume is made owned by the VM, the VM shows Provisioning
    with no VMI until the import Succeeded (progress 100.0%), then the VMI runs with the
    imported disk as vda (disk.img raw, grown to the 64Mi asked for); restarted, the guest
    finds the counter the first boot wrote."""
    k, ns = real_stack, real_namespace
    template = _dv("root", {"registry": {"url": f"docker://{GUEST_IMAGE}", "pullMethod": "node"}})
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "dvvm"},
        "spec": {
            "runStrategy": "Always",
            "dataVolumeTemplates": [{"metadata": template["metadata"], "spec": template["spec"]}],
            "template": {"spec": _guest_spec({"dataVolume": {"name": "root"}})},
        },
    }
    _apply(k, ns, vm)

    def provisioning() -> bool:
        status = _get(k, ns, "vm", "dvvm").get("status", {})
        return bool(status.get("printableStatus") == "Provisioning")

    _wait(provisioning, 120, "VM Provisioning", lambda: _get(k, ns, "vm", "dvvm").get("status"))
    dv = _final(k, ns, "root")
    assert dv["status"]["phase"] == "Succeeded", _ready_message(dv)
    assert dv["status"]["progress"] == "100.0%"
    owner = dv["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("VirtualMachine", "dvvm", True)
    claim = _get(k, ns, "pvc", "root")
    assert claim["status"]["phase"] == "Bound"

    first = _running(k, ns, "dvvm")
    (line,) = _disk_lines(real_cluster, first, 1)
    found, wrote = _counter(line)
    assert wrote == found + 1
    restarted = _virtctl(real_cluster.kubeconfig, ns, "restart", "dvvm")
    assert restarted.returncode == 0, restarted.stderr
    second = _running(k, ns, "dvvm", not_uid=first["metadata"]["uid"])
    (line,) = _disk_lines(real_cluster, second, 1)
    assert _counter(line) == (wrote, wrote + 1)
    assert _get(k, ns, "vm", "dvvm")["status"]["printableStatus"] == "Running"


@pytest.fixture
def http_server(real_stack: Kubectl, real_namespace: str) -> Iterator[str]:
    """A bare pod serving the guest's disk.qcow2 and notes.txt (busybox httpd); its URL.
    Deleted, and waited for, at teardown: a bare pod left terminating on a node would
    hold a later `kubectl drain` of it (drain refuses unmanaged pods without --force)."""
    k, ns = real_stack, real_namespace
    copy = ["/bin/busybox", "cp", "/bin/busybox", "/bin-dir/busybox"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "http-images"},
        "spec": {
            "terminationGracePeriodSeconds": 1,  # busybox httpd ignores SIGTERM as PID 1
            "initContainers": [
                {"name": "busybox", "image": LAUNCHER_IMAGE, "command": copy,
                 "volumeMounts": [{"name": "bin", "mountPath": "/bin-dir"}]},
                {"name": "disk", "image": GUEST_IMAGE,
                 "command": ["/bin-dir/busybox", "sh", "-c", SERVE_FILES],
                 "volumeMounts": [{"name": "bin", "mountPath": "/bin-dir"},
                                  {"name": "srv", "mountPath": "/srv"}]},
            ],
            "containers": [
                {"name": "httpd", "image": LAUNCHER_IMAGE,
                 "command": ["/bin/busybox", "httpd", "-f", "-p", "8080", "-h", "/srv"],
                 "volumeMounts": [{"name": "srv", "mountPath": "/srv"}]},
            ],
            "volumes": [{"name": "bin", "emptyDir": {}}, {"name": "srv", "emptyDir": {}}],
        },
    }  # fmt: skip
    _apply(k, ns, pod)

    def ip() -> str | None:
        status = _get(k, ns, "pod", "http-images").get("status", {})
        return status.get("podIP") if status.get("phase") == "Running" else None

    address = _wait(ip, 180, "HTTP server pod Running", lambda: _get(k, ns, "pod", "http-images"))
    yield f"http://{address}:8080"
    k("delete", "pod", "http-images", "-n", ns, "--wait=true", "--timeout=60s")


def test_http_and_clone_datavolumes_succeed_and_boot(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str, http_server: str
) -> None:
    """An http DataVolume imports the qcow2 an in-cluster HTTP server serves; a pvc
    DataVolume in the same (CSI) StorageClass is cloned by the driver (the claim's
    dataSource), one into the hand-made local-storage class is copied by a pod
    (CloneScheduled → Succeeded); a VMI on each boots and finds the disk."""
    k, ns = real_stack, real_namespace
    base = http_server
    _apply(k, ns, _dv("golden", {"http": {"url": f"{base}/disk.qcow2"}}))
    golden = _final(k, ns, "golden")
    assert golden["status"]["phase"] == "Succeeded", _ready_message(golden)
    _apply(k, ns, _dv("clone", {"pvc": {"name": "golden", "namespace": ns}}))
    copy = _dv("copy", {"pvc": {"name": "golden"}})
    copy["spec"]["storage"]["storageClassName"] = LOCAL_STORAGE
    _apply(k, ns, copy)
    for name in ("clone", "copy"):
        done = _final(k, ns, name)
        assert done["status"]["phase"] == "Succeeded", (name, _ready_message(done))
    # the CSI driver cloned (the claim's dataSource); into another class a pod copied
    assert _get(k, ns, "pvc", "clone")["spec"]["dataSource"]["name"] == "golden"
    assert "dataSource" not in _get(k, ns, "pvc", "copy")["spec"]
    events = json.loads(k("get", "events", "-n", ns, "-o", "json"))["items"]
    reasons = {e["reason"] for e in events if e["involvedObject"].get("name") == "copy"}
    assert {"CloneScheduled", "Succeeded"} <= reasons
    for name in ("clone", "copy"):
        _apply(k, ns, _vmi(f"on-{name}", name))
        vmi = _running(k, ns, f"on-{name}")
        (line,) = _disk_lines(real_cluster, vmi, 1)
        found, wrote = _counter(line)
        assert wrote == found + 1


def test_bad_inputs_end_in_failed_datavolumes_with_the_reason(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str, http_server: str
) -> None:
    """A missing image, a 404, a claim too small for the image and a non-disk file (over
    http) each end in a Failed DataVolume whose Ready condition says why; a VM on the 404 one shows
    DataVolumeError and a Failure condition naming it, and gets no VMI."""
    k, ns = real_stack, real_namespace
    base = http_server
    cases = {
        "no-image": (
            {"registry": {"url": "docker://registry.local/kubevirt-py/no-such-image:v1"}},
            "64Mi",
            "the source image cannot be pulled",
        ),
        "not-found": ({"http": {"url": f"{base}/missing.qcow2"}}, "64Mi", "404"),
        "not-a-disk": ({"http": {"url": f"{base}/notes.txt"}}, "64Mi", "not a disk image"),
        "too-small": (
            {"registry": {"url": f"docker://{GUEST_IMAGE}", "pullMethod": "node"}},
            "8Mi",
            f"Virtual image size {GUEST_VIRTUAL_SIZE} is larger than the reported available "
            f"storage {8 * 1024**2}",
        ),
    }
    for name, (source, size, _) in cases.items():
        _apply(k, ns, _dv(name, source, size))
    for name, (_, _, why) in cases.items():
        dv = _final(k, ns, name)
        assert dv["status"]["phase"] == "Failed", name
        assert why in _ready_message(dv), (name, _ready_message(dv))
    _assert_vm_shows_the_failure(k, ns, "not-found")


def _assert_vm_shows_the_failure(k: Kubectl, ns: str, dv: str) -> None:
    """A VM on the Failed DataVolume `dv`: DataVolumeError, a Failure condition naming
    it and why, and no VMI."""
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "on-404"},
        "spec": {
            "runStrategy": "Always",
            "template": {"spec": _guest_spec({"dataVolume": {"name": dv}})},
        },
    }
    _apply(k, ns, vm)

    def error() -> dict[str, Any] | None:
        status: dict[str, Any] = _get(k, ns, "vm", "on-404").get("status", {})
        return status if status.get("printableStatus") == "DataVolumeError" else None

    status = _wait(error, 120, "VM DataVolumeError", lambda: _get(k, ns, "vm", "on-404"))
    (failure,) = [c for c in status["conditions"] if c["type"] == "Failure"]
    assert f"DataVolume {ns}/{dv} failed" in failure["message"]
    assert "404" in failure["message"]
    assert _get(k, ns, "vmi", "on-404") == {}
