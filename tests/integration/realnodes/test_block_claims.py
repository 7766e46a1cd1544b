"""Block-mode claims end to end on real nodes: a `volumeMode: Block` claim of the local
cluster's CSI class is accepted, given to the launcher's compute container as a device
(`volumeDevices` at /dev/vmi-disks/<volume>), attached as `<disk type='block'>`, and the
guest reads and writes it: the tiny guest bumps a counter at the start of vdb each boot, so
a second VMI on the same claim (on the other node) finds what the first wrote. A second
Block claim is then hotplugged into that running VMI."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_shared_storage import _domain_xml, _template
from tests.integration.realnodes.test_storage import _apply, _disk_lines, _get, _running
from tests.integration.realnodes.test_story import _serial, _virtctl, _wait

pytestmark = pytest.mark.cluster


def _vmi(name: str, node: str) -> dict[str, Any]:
    vmi = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
           "metadata": {"name": name}, "spec": _template("blk")["spec"]}  # fmt: skip
    vmi["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return vmi


def _domain_disks(cluster: Cluster, vmi: dict[str, Any]) -> dict[str, ET.Element]:
    """The domain's disks by target name."""
    disks = _domain_xml(cluster, vmi).iter("disk")
    return {d.find("target").get("dev", ""): d for d in disks}  # type: ignore[union-attr]


def test_guest_reads_and_writes_a_block_claim(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A 64Mi Block claim: the launcher pod has it as a volumeDevice, the domain has vdb as
    a block disk on /dev/vmi-disks/data, the guest finds it empty and writes its counter;
    a second VMI on the other node finds the counter and bumps it; a Block claim
    hotplugged into it is attached as a block disk the guest writes."""
    k, ns = real_stack, real_namespace
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "blk"},
             "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Block",
                      "resources": {"requests": {"storage": "64Mi"}}}}  # fmt: skip
    _apply(k, ns, claim)
    _apply(k, ns, _vmi("first", "node01"))
    first = _running(k, ns, "first")
    pods = json.loads(k("get", "pods", "-n", ns, "-o", "json"))["items"]
    (compute,) = [c for p in pods for c in p["spec"]["containers"] if c["name"] == "compute"]
    assert {"name": "data", "devicePath": "/dev/vmi-disks/data"} in compute["volumeDevices"]
    vdb = _domain_disks(real_cluster, first)["vdb"]
    assert vdb.get("type") == "block"
    assert vdb.find("source").get("dev") == "/dev/vmi-disks/data"  # type: ignore[union-attr]
    assert _disk_lines(real_cluster, first, 1) == ["KUBEVIRT-PY-DISK vdb ro=0 found=0 wrote=1"]
    k("delete", "vmi", "first", "-n", ns, "--wait=true", "--timeout=120s")
    _wait(lambda: not _get(k, ns, "pvc", "blk").get("metadata", {}).get("deletionTimestamp")
          and not json.loads(k("get", "pods", "-n", ns, "-o", "json"))["items"],
          120, "the first launcher pod gone")  # fmt: skip
    _apply(k, ns, _vmi("second", "node02"))
    second = _running(k, ns, "second")
    assert _disk_lines(real_cluster, second, 1) == ["KUBEVIRT-PY-DISK vdb ro=0 found=1 wrote=2"]
    _hotplug_a_block_claim(k, real_cluster, second)


def _hotplug_a_block_claim(k: Kubectl, cluster: Cluster, vmi: dict[str, Any]) -> None:
    """A second Block claim hotplugged into the running VMI: Ready as vdc, a block disk in
    the domain (the handler allowed the device in the launcher's cgroup), and the guest
    finds it empty and writes its counter."""
    ns, name = vmi["metadata"]["namespace"], vmi["metadata"]["name"]
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "blk-hp"},
             "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Block",
                      "resources": {"requests": {"storage": "16Mi"}}}}  # fmt: skip
    _apply(k, ns, claim)
    added = _virtctl(cluster.kubeconfig, ns, "addvolume", name, "--volume-name=blk-hp",
                     "--bus=virtio")  # fmt: skip
    assert added.returncode == 0, added.stderr

    def ready() -> dict[str, Any] | None:
        found = _get(k, ns, "vmi", name).get("status", {}).get("volumeStatus", [])
        state = next((v for v in found if v["name"] == "blk-hp"), None)
        return state if state and state.get("phase") == "Ready" else None

    state = _wait(ready, 180, "blk-hp Ready", lambda: _get(k, ns, "vmi", name).get("status"))
    assert state["target"] == "vdc"
    assert _domain_disks(cluster, vmi)["vdc"].get("type") == "block"
    line = "KUBEVIRT-PY-DISK vdc ro=0 found=0 wrote=1\n"
    _wait(lambda: line in _serial(cluster, vmi), 120, repr(line),
          lambda: _serial(cluster, vmi)[-800:])  # fmt: skip
