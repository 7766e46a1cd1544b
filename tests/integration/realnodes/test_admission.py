"""Admission on real nodes: the webhooks arrive with manifests/overlays/local and the
kube-apiserver calls the controllers for every VMI, VM and VMIM written with kubectl."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.errors import LocalKubeError
from tests.integration.realnodes.test_story import REPO, _serial, _wait

pytestmark = pytest.mark.cluster


def _tiny_vmi(name: str) -> dict[str, Any]:
    """examples/vmi-tiny.yaml without the containerDisk's disk and without any network:
    admission adds the disk (virtio) and the pod network with masquerade, as KubeVirt does."""
    vmi: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    vmi["metadata"] = {"name": name}
    devices = vmi["spec"]["domain"]["devices"]
    devices["disks"] = [d for d in devices["disks"] if d["name"] != "containerdisk"]
    del devices["interfaces"], vmi["spec"]["networks"]
    return vmi


def _apply(k: Kubectl, ns: str, obj: dict[str, Any]) -> str:
    return k("apply", "-n", ns, "-f", "-", stdin=json.dumps(obj))


def test_unsupported_fields_are_refused_naming_each(
    real_stack: Kubectl, real_namespace: str
) -> None:
    """kubectl apply of a VMI asking for a GPU and an access credential without a source
    fails, naming both fields in one answer; nothing is created."""
    vmi = _tiny_vmi("gpu")
    vmi["spec"]["accessCredentials"] = [{"sshPublicKey": {}}]
    vmi["spec"]["domain"]["devices"]["gpus"] = [{"name": "g1", "deviceName": "nvidia.com/GP100"}]
    with pytest.raises(LocalKubeError) as refused:
        _apply(real_stack, real_namespace, vmi)
    message = str(refused.value)
    assert 'VirtualMachineInstance "gpu" is invalid' in message
    assert "spec.domain.devices.gpus: not supported by kubevirt-py" in message
    assert "spec.accessCredentials[0].sshPublicKey.source: " in message
    listed = json.loads(real_stack("get", "vmi", "-n", real_namespace, "-o", "json"))
    assert listed["items"] == []


def test_migration_of_a_missing_vmi_is_refused(real_stack: Kubectl, real_namespace: str) -> None:
    """A VMIM naming a VMI that does not exist is refused at spec.vmiName."""
    vmim = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": "mig-ghost"},
        "spec": {"vmiName": "ghost"},
    }
    with pytest.raises(LocalKubeError) as refused:
        _apply(real_stack, real_namespace, vmim)
    assert "spec.vmiName: VirtualMachineInstance 'ghost' does not exist" in str(refused.value)


def test_a_volume_without_a_disk_gets_one_and_boots(
    real_cluster: Cluster, real_stack: Kubectl, real_namespace: str
) -> None:
    """The defaulted VMI (disk, pod network, machine type, memory request) boots the guest."""
    k, ns = real_stack, real_namespace
    _apply(k, ns, _tiny_vmi("tiny"))

    def vmi() -> dict[str, Any]:
        out = k("get", "vmi", "tiny", "-n", ns, "-o", "json", check=False)
        return json.loads(out) if out else {}

    spec = copy.deepcopy(vmi()["spec"])
    disks = {d["name"]: d for d in spec["domain"]["devices"]["disks"]}
    assert disks["containerdisk"] == {"name": "containerdisk", "disk": {"bus": "virtio"}}
    assert spec["networks"] == [{"name": "default", "pod": {}}]
    assert spec["domain"]["devices"]["interfaces"] == [{"name": "default", "masquerade": {}}]
    assert spec["domain"]["machine"]["type"]
    running = _wait(
        lambda: (v := vmi()).get("status", {}).get("phase") == "Running" and v,
        300,
        "defaulted VMI Running",
        lambda: vmi().get("status"),
    )
    serial = _wait(
        lambda: "KUBEVIRT-PY-GUEST-BOOTED" in (t := _serial(real_cluster, running)) and t,
        180,
        "the guest's boot on its console",
        lambda: _serial(real_cluster, running)[-500:],
    )
    assert "KUBEVIRT-PY-GUEST-BOOTED" in serial
