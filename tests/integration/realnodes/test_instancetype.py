"""Instancetypes and preferences on real nodes: the demo VM, its CPU and memory taken out of
its template and named by a VirtualMachineInstancetype and a VirtualMachineClusterPreference
instead, boots with the instancetype's CPU and memory (in the VMI and in the QEMU that runs
it) and the preference's machine type and disk bus; KubeVirt's common-instancetypes bundle
applied, and a VM made from it by `virtctl-py create vm` boots."""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_export import _virtctl_py
from tests.integration.realnodes.test_platform import _qemu_cmdline
from tests.integration.realnodes.test_story import REPO, _serial, _wait

pytestmark = pytest.mark.cluster
API = "instancetype.kubevirt.io/v1beta1"


def _vm(ns: str, preference: str) -> dict[str, Any]:
    vm: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vm-demo.yaml").read_text())
    vm["metadata"].update(name="typed", namespace=ns)
    vm["spec"]["instancetype"] = {"name": "two-cpus", "kind": "VirtualMachineInstancetype"}
    vm["spec"]["preference"] = {"name": preference}
    template = vm["spec"]["template"]
    template["metadata"]["labels"] = {"kubevirt.io/vm": "typed"}
    domain = template["spec"]["domain"]
    for key in ("cpu", "memory", "resources"):  # the instancetype's to set
        domain.pop(key, None)
    del domain["devices"]["disks"][0]["disk"]["bus"]  # the preference's to choose
    return vm


def test_vm_with_an_instancetype_boots_with_its_cpu_and_memory(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """The VMI of a VM naming an instancetype (2 vCPUs, 160Mi) and a cluster preference
    (q35, sata disks) has them in its spec, QEMU runs with -smp 2 and 160 MiB, and the
    guest boots; the VM names the ControllerRevisions that captured both objects."""
    k, ns = real_stack, real_namespace
    preference = f"pref-{uuid.uuid4().hex[:6]}"
    k("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": API, "kind": "VirtualMachineInstancetype",
        "metadata": {"name": "two-cpus", "namespace": ns},
        "spec": {"cpu": {"guest": 2}, "memory": {"guest": "160Mi"}},
    }))  # fmt: skip
    k("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": API, "kind": "VirtualMachineClusterPreference",
        "metadata": {"name": preference},
        "spec": {"devices": {"preferredDiskBus": "sata"},
                 "machine": {"preferredMachineType": "q35"}},
    }))  # fmt: skip
    try:
        k("apply", "-f", "-", stdin=json.dumps(_vm(ns, preference)))

        def vmi() -> dict[str, Any]:
            out = k("get", "vmi", "typed", "-n", ns, "-o", "json", check=False)
            return json.loads(out) if out else {}

        running = _wait(
            lambda: (v := vmi()).get("status", {}).get("phase") == "Running" and v,
            300,
            "the typed VMI Running",
            lambda: vmi().get("status"),
        )
        domain = running["spec"]["domain"]
        assert domain["cpu"]["sockets"] == 2, domain["cpu"]
        assert domain["memory"]["guest"] == "160Mi", domain["memory"]
        assert domain["machine"]["type"] == "q35"
        assert domain["devices"]["disks"][0]["disk"]["bus"] == "sata"
        _wait(
            lambda: "KUBEVIRT-PY-GUEST-BOOTED" in (t := _serial(real_cluster, running)) and t,
            180,
            "the guest's boot on its console",
            lambda: _serial(real_cluster, running)[-800:],
        )
        cmdline = _qemu_cmdline(f"guest={ns}_typed")
        assert "-smp 2," in cmdline or "-smp 2 " in cmdline, cmdline
        assert "-m size=163840k" in cmdline or "-m 160" in cmdline, cmdline
        vm = json.loads(k("get", "vm", "typed", "-n", ns, "-o", "json"))
        revisions = (
            vm["spec"]["instancetype"].get("revisionName"),
            vm["spec"]["preference"].get("revisionName"),
        )
        assert all(revisions), vm["spec"]
        for name in revisions:
            k("get", "controllerrevision", name, "-n", ns)
    finally:
        k("delete", "vm", "typed", "-n", ns, "--wait=true", "--timeout=120s", check=False)
        k("delete", "virtualmachineclusterpreference", preference, check=False)


# KubeVirt's common-instancetypes on real nodes: the bundle applied through the admission
# webhooks, a VM made by `virtctl-py create vm --instancetype u1.small --preference …`.
BUNDLE_PREFERENCE = "alpine"  # the tiny guest is a busybox Linux: virtio disk and NIC, rng
TINY_GUEST = "registry.local/kubevirt-py/tiny-guest:v1"


def _bundle(k: Kubectl) -> subprocess.CompletedProcess[str]:
    argv = [str(REPO / "scripts" / "common-instancetypes"), "--apply", str(k.binary),
            "--kubeconfig", str(k.kubeconfig)]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)


def test_common_instancetypes_and_a_vm_made_from_them(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """KubeVirt's common-instancetypes bundle is applied through the webhooks (all 119
    admitted, a second apply a no-op); `virtctl-py create vm --instancetype u1.small
    --preference alpine` makes a VM whose guest boots with u1.small's 1 vCPU and 2Gi and
    the preference's virtio disk and rng; a VM naming cx1.medium1gi gets its dedicated
    CPUs and hugepages on its launcher pod; a VM inferring both from a claim's labels gets them named."""
    k, ns = real_stack, real_namespace
    applied = _bundle(k)
    assert applied.returncode == 0, applied.stderr
    names = k("get", "virtualmachineclusterinstancetypes,virtualmachineclusterpreferences",
              "-l", "instancetype.kubevirt.io/common-instancetypes-version", "-o", "name")  # fmt: skip
    kinds = [line.split("/")[0] for line in names.split()]
    assert (kinds.count(kinds[0]), len(kinds)) == (65, 119), names
    again = _bundle(k)
    assert again.returncode == 0 and "already applied" in again.stderr, again.stderr
    manifest = _virtctl_py(
        k.kubeconfig, ns, "create", "vm", "--name", "bundled", "--instancetype", "u1.small",
        "--preference", BUNDLE_PREFERENCE, "--volume-containerdisk", f"src:{TINY_GUEST}",
        "--kernel-image", TINY_GUEST, "--kernel-args", "console=ttyS0",
    )  # fmt: skip
    k("apply", "-n", ns, "-f", "-", stdin=manifest)

    def vmi() -> dict[str, Any]:
        out = k("get", "vmi", "bundled", "-n", ns, "-o", "json", check=False)
        return json.loads(out) if out else {}

    running = _wait(
        lambda: (v := vmi()).get("status", {}).get("phase") == "Running" and v,
        300, "the bundled VMI Running", lambda: vmi().get("status"),
    )  # fmt: skip
    domain = running["spec"]["domain"]
    assert (domain["cpu"]["sockets"], domain["memory"]["guest"]) == (1, "2Gi"), domain
    assert domain["devices"]["disks"][0]["disk"]["bus"] == "virtio", domain["devices"]
    assert "rng" in domain["devices"], domain["devices"]
    _wait(
        lambda: "KUBEVIRT-PY-GUEST-BOOTED" in (t := _serial(real_cluster, running)) and t,
        180, "the bundled guest's boot on its console",
        lambda: _serial(real_cluster, running)[-800:],
    )  # fmt: skip
    _hugepaged(k, ns)
    _inferred(k, ns)


def _hugepaged(k: Kubectl, ns: str) -> None:
    """cx1.medium1gi's dedicated CPUs, isolated emulator thread and 1Gi hugepages land on
    the launcher pod: 2 whole CPUs (1 vCPU + the emulator thread) and 2Gi of hugepages-1Gi,
    requests equal to limits (no node here has 1Gi pages: it stays Pending)."""
    k("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "hugepaged", "namespace": ns},
        "spec": {"runStrategy": "Always", "instancetype": {"name": "cx1.medium1gi"},
                 "template": {"spec": {
                     "domain": {"devices": {"disks": [{"name": "root"}]}},
                     "volumes": [{"name": "root", "containerDisk": {"image": TINY_GUEST}}]}}},
    }))  # fmt: skip

    def compute() -> dict[str, Any] | None:
        out = k("get", "pods", "-n", ns, "-l", "kubevirt.io/vm=hugepaged", "-o", "json")
        found = json.loads(out)["items"]
        containers = found[0]["spec"]["containers"] if found else []
        return next((c for c in containers if c["name"] == "compute"), None)

    def seen() -> Any:
        vm = json.loads(k("get", "vm", "hugepaged", "-n", ns, "-o", "json"))
        events = k("get", "events", "-n", ns, "--field-selector", "involvedObject.name=hugepaged")
        return {"vm": vm.get("status"), "events": events}

    resources = _wait(compute, 120, "hugepaged's launcher pod", seen)["resources"]
    for kind in ("requests", "limits"):
        assert resources[kind]["cpu"] == "2", resources
        assert resources[kind]["hugepages-1Gi"] == str(2 << 30), resources
    k("delete", "vm", "hugepaged", "-n", ns, "--wait=false")


def _inferred(k: Kubectl, ns: str) -> None:
    """A halted VM inferring its instancetype and preference from a labelled claim."""
    label = "instancetype.kubevirt.io/default"
    k("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "golden", "namespace": ns,
                     "labels": {f"{label}-instancetype": "u1.small",
                                f"{label}-preference": BUNDLE_PREFERENCE}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))  # fmt: skip
    manifest = _virtctl_py(
        k.kubeconfig, ns, "create", "vm", "--name", "inferred", "--run-strategy", "Halted",
        "--volume-pvc", "src:golden",
    )  # fmt: skip
    k("apply", "-n", ns, "-f", "-", stdin=manifest)
    vm = json.loads(k("get", "vm", "inferred", "-n", ns, "-o", "json"))
    for key, name in (("instancetype", "u1.small"), ("preference", BUNDLE_PREFERENCE)):
        matcher = vm["spec"][key]
        assert matcher["name"] == name and "inferFromVolume" not in matcher, vm["spec"]
