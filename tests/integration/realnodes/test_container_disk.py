"""containerDisk and kernelBoot images on real nodes (containerd 2): by default each image
is a Kubernetes image volume, mounted read-only in the launcher pod and read in place, so
starting VMs writes no file of the image on the node, however many VMs use it; with the
controller's Copy delivery (runtimes without image volumes) the pod's init containers
copy the files, which costs the node the image's size per VM (docs/containerdisk.md)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.imagestore import ImageStore, default_root
from shared import podlayout
from tests.integration.realnodes.conftest import pods
from tests.integration.realnodes.test_story import REPO, _wait

pytestmark = pytest.mark.cluster
NODE = "node01"
DELIVERY_ENV = "VIRT_CONTROLLER_CONTAINER_DISK_DELIVERY"


def _tiny(name: str, ns: str) -> dict[str, Any]:
    """examples/vmi-tiny.yaml as `name`, pinned to NODE."""
    vmi: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    vmi["metadata"] = {"name": name, "namespace": ns}
    vmi["spec"]["nodeSelector"] = {"kubernetes.io/hostname": NODE}
    return vmi


def _kernel_bytes(vmi: dict[str, Any]) -> int:
    """The size of the kernel the VMI boots, as the image holds it (the local image store
    scripts/build-guest registered the tiny guest in)."""
    boot = vmi["spec"]["domain"]["firmware"]["kernelBoot"]["container"]
    store = ImageStore(default_root(os.environ))
    return store.file(boot["image"], boot["kernelPath"]).stat().st_size


def _node_bytes(cluster: Cluster) -> int:
    """Disk blocks used under the node's directory (containerd's snapshots and state, the
    kubelet's pod volumes), on its own filesystem only."""
    node_dir = cluster.fleet().node(NODE).layout.dir
    out = subprocess.run(["du", "-sx", "--block-size=1", str(node_dir)],
                         capture_output=True, text=True, check=True, timeout=120)  # fmt: skip
    return int(out.stdout.split()[0])


def _start(k: Kubectl, ns: str, names: list[str]) -> list[dict[str, Any]]:
    """The VMIs created and Running; their launcher pods."""
    for name in names:
        k("apply", "-f", "-", stdin=json.dumps(_tiny(name, ns)))

    def running() -> bool:
        items: list[dict[str, Any]] = json.loads(k("get", "vmi", "-n", ns, "-o", "json"))["items"]
        phases = [str(v.get("status", {}).get("phase")) for v in items]
        return phases.count("Running") == len(names)

    _wait(running, 300, f"{len(names)} VMIs Running",
          lambda: k("get", "vmi,pods", "-n", ns, "-o", "wide"))  # fmt: skip
    launchers = pods(k, ns, "kubevirt.io=virt-launcher")
    assert len(launchers) == len(names)
    return launchers


def _image_mounts(k: Kubectl, ns: str, pod: str) -> list[list[str]]:
    """The launcher's mountinfo lines under the image-volumes dir, split (the image's
    /var/run is /run, so the mount points show without /var)."""
    text = k("exec", "-n", ns, pod, "-c", "compute", "--",
             podlayout.LAUNCHER_BUSYBOX, "cat", "/proc/self/mountinfo")  # fmt: skip
    under = podlayout.IMAGE_VOLUMES_DIR.removeprefix("/var") + "/"
    return [f for ln in text.splitlines() if (f := ln.split())[4].startswith(under)]


def test_the_nodes_run_containerd_2_and_the_kubelet_keeps_supporting_it(
    real_stack: Kubectl,
) -> None:
    """Every node reports containerd 2 as its runtime, and no kubelet exposes
    kubelet_cri_losing_support (set only for runtimes a coming release drops, as 1.x)."""
    k = real_stack
    nodes = json.loads(k("get", "nodes", "-o", "json"))["items"]
    assert nodes
    for node in nodes:
        name = node["metadata"]["name"]
        version = node["status"]["nodeInfo"]["containerRuntimeVersion"]
        assert version.removeprefix("containerd://").lstrip("v").startswith("2."), (name, version)
        metrics = k("get", "--raw", f"/api/v1/nodes/{name}/proxy/metrics")
        assert "kubelet_cri_losing_support{" not in metrics, name


def test_vms_from_one_image_read_it_in_place_without_a_copy(
    real_cluster: Cluster, real_stack: Kubectl, real_namespace: str
) -> None:
    """Three VMIs booted on one node from the tiny-guest containerDisk and kernelBoot
    image: each launcher pod has no init container and no copy volume, only the two image
    volumes, mounted read-only; once the node has the image (the first VMI), the next two
    grew the node's disk usage by less than one copy of the image's kernel."""
    k, ns = real_stack, real_namespace
    kernel = _kernel_bytes(_tiny("x", ns))
    _start(k, ns, ["shared-a"])  # the image is on the node and unpacked from here on
    before = _node_bytes(real_cluster)
    launchers = _start(k, ns, ["shared-a", "shared-b", "shared-c"])
    grown = _node_bytes(real_cluster) - before
    for pod in launchers:
        spec = pod["spec"]
        assert isinstance(spec, dict)
        assert spec["nodeName"] == NODE
        assert spec.get("initContainers", []) == []
        images = {v["name"]: v["image"]["reference"] for v in spec["volumes"] if "image" in v}
        assert set(images.values()) == {"registry.local/kubevirt-py/tiny-guest:v1"}
        assert set(images) == {"containerdisk", podlayout.KERNEL_BOOT_VOLUME}
        assert not [v for v in spec["volumes"] if v["name"] == podlayout.CONTAINER_DISKS_VOLUME]
        mounts = _image_mounts(k, ns, str(pod["metadata"]["name"]))
        assert len(mounts) == 2, mounts
        for fields in mounts:
            assert "ro" in fields[5].split(","), fields  # the mount's own options
    assert grown < kernel, f"node grew {grown} bytes for 2 VMs; one kernel copy is {kernel}"


@pytest.fixture
def copy_delivery(real_stack: Kubectl) -> Iterator[Kubectl]:
    """The controller switched to the Copy delivery for one test, then back."""
    k = real_stack

    def switch(value: str) -> None:
        k("set", "env", "deployment/virt-controller", "-n", "kubevirt", value)
        k("rollout", "status", "deployment/virt-controller", "-n", "kubevirt", "--timeout=240s")

    switch(f"{DELIVERY_ENV}=Copy")
    try:
        yield k
    finally:
        switch(f"{DELIVERY_ENV}-")


def test_the_copy_fallback_boots_from_copies(
    real_cluster: Cluster, copy_delivery: Kubectl, real_namespace: str
) -> None:
    """With --container-disk-delivery=Copy (a runtime without image volumes) the launcher
    pod copies busybox, the disk and the kernel/initrd with its init containers into the
    container-disks emptyDir, has no image volume, and the guest still boots; the copy
    costs the node at least the kernel's size."""
    k, ns = copy_delivery, real_namespace
    kernel = _kernel_bytes(_tiny("x", ns))
    before = _node_bytes(real_cluster)
    (pod,) = _start(k, ns, ["copied"])
    grown = _node_bytes(real_cluster) - before
    spec = pod["spec"]
    assert isinstance(spec, dict)
    inits = [c["name"] for c in spec["initContainers"]]
    assert inits == [podlayout.BINARY_INIT_CONTAINER, "volumecontainerdisk",
                     podlayout.KERNEL_BOOT_INIT_CONTAINER]  # fmt: skip
    assert not [v for v in spec["volumes"] if "image" in v]
    assert grown >= kernel, f"node grew {grown} bytes; the kernel copy alone is {kernel}"
    uid = str(pod["metadata"]["uid"])
    pod_dir = real_cluster.fleet().node(NODE).layout.kubelet_dir / "pods" / uid
    copies = pod_dir / podlayout.EMPTY_DIRS / podlayout.CONTAINER_DISKS_VOLUME
    assert Path(copies / podlayout.kernel_file()).stat().st_size == kernel
