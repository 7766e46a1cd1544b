"""Hotplug on real nodes: a claim hot-plugged into a running guest through
`virtctl-py addvolume` (the VMI's addvolume subresource), mounted on the node by its
attachment pod, bind-mounted into the launcher pod by virt-handler and attached live by
the launcher; the guest (scripts/guest/init) reports each disk that appears or goes and
bumps a counter at the start of a new one, so the console shows the disk seen, written,
removed, and its data there again when it comes back on the other bus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_storage import _apply, _claim, _get, _running
from tests.integration.realnodes.test_story import _pod_uid, _serial, _virtctl, _wait

pytestmark = pytest.mark.cluster
NAME = "hotplug"


def _vmi() -> dict[str, Any]:
    """The tiny guest with one emptyDisk (vda): a volume that is not hotpluggable."""
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": NAME},
        "spec": {
            "domain": {
                "devices": {"disks": [{"name": "scratch", "disk": {"bus": "virtio"}}]},
                "firmware": {
                    "kernelBoot": {
                        "container": {
                            "image": "registry.local/kubevirt-py/tiny-guest:v1",
                            "initrdPath": "/boot/initrd.img",
                            "kernelPath": "/boot/vmlinuz",
                        },
                        "kernelArgs": "console=ttyS0 panic=-1 quiet",
                    }
                },
                "resources": {"requests": {"memory": "128Mi"}},
            },
            "terminationGracePeriodSeconds": 0,
            "volumes": [{"name": "scratch", "emptyDisk": {"capacity": "16Mi"}}],
        },
    }


def _console_has(cluster: Cluster, vmi: dict[str, Any], line: str) -> None:
    _wait(lambda: line in _serial(cluster, vmi), 180, repr(line),
          lambda: _serial(cluster, vmi)[-800:])  # fmt: skip


def _volume_state(k: Kubectl, ns: str) -> dict[str, Any] | None:
    found = _get(k, ns, "vmi", NAME).get("status", {}).get("volumeStatus", [])
    return next((v for v in found if v["name"] == "hp-disk"), None)


def _ready(k: Kubectl, ns: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        state = _volume_state(k, ns)
        return state if state and state.get("phase") == "Ready" else None

    found: dict[str, Any] = _wait(probe, 180, "hp-disk Ready", lambda: _volume_state(k, ns))
    return found


def _attachment_pods(k: Kubectl, ns: str) -> list[str]:
    out = k("get", "pods", "-n", ns, "-l", "kubevirt.io=hotplug-disk", "-o", "json")
    return [p["metadata"]["name"] for p in json.loads(out)["items"]]


def _condition_reason(k: Kubectl, ns: str, kind: str) -> str:
    conds = _get(k, ns, "vmi", NAME).get("status", {}).get("conditions", [])
    return next((str(c.get("reason", "")) for c in conds if c["type"] == kind), "")


def _refused(kubeconfig: Path, ns: str, *args: str) -> str:
    done = _virtctl(kubeconfig, ns, *args)
    assert done.returncode != 0, done.stdout
    return done.stderr


def _remove(k: Kubectl, kubeconfig: Path, ns: str) -> None:
    done = _virtctl(kubeconfig, ns, "removevolume", NAME, "--volume-name=hp-disk")
    assert done.returncode == 0, done.stderr
    _wait(lambda: _volume_state(k, ns) is None and not _attachment_pods(k, ns), 180,
          "hp-disk gone from volumeStatus, its attachment pod deleted",
          lambda: (_volume_state(k, ns), _attachment_pods(k, ns)))  # fmt: skip


def test_claim_hotplugged_into_a_running_guest_on_real_nodes(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """Refused with the name: a claim that does not exist, removing the emptyDisk (not
    hotpluggable), adding a volume name twice. Added on scsi: volumeStatus Ready with its
    target and attachment pod; the guest sees sda, finds it empty and writes it. Removed:
    the guest sees sda go, the entry and the pod are gone. Added again on virtio: vdb,
    with what was written before. Then the VMI is deleted with the disk attached: it goes,
    and the node's pod directory of its launcher is removed (no mount left behind)."""
    k, ns, kubeconfig = real_stack, real_namespace, real_cluster.kubeconfig
    _apply(k, ns, _vmi())
    vmi = _running(k, ns, NAME)
    _console_has(real_cluster, vmi, "KUBEVIRT-PY-TICK 1\n")

    missing = _refused(kubeconfig, ns, "addvolume", NAME, "--volume-name=nope")
    assert f"PersistentVolumeClaim {ns}/nope does not exist" in missing
    not_hotplug = _refused(kubeconfig, ns, "removevolume", NAME, "--volume-name=scratch")
    assert "Unable to remove volume [scratch] because it is not hotpluggable" in not_hotplug

    _apply(k, ns, _claim("hp-disk"))
    added = _virtctl(kubeconfig, ns, "addvolume", NAME, "--volume-name=hp-disk")
    assert added.returncode == 0, added.stderr
    twice = _refused(kubeconfig, ns, "addvolume", NAME, "--volume-name=hp-disk")
    assert "Unable to add volume [hp-disk] because volume with that name already exists" in twice

    state = _ready(k, ns)
    assert state["target"] == "sda"
    assert state["hotplugVolume"]["attachPodName"].startswith("hp-volume-")
    assert _attachment_pods(k, ns) == [state["hotplugVolume"]["attachPodName"]]
    _console_has(real_cluster, vmi, "KUBEVIRT-PY-HOTPLUG-ADDED sda\n")
    _console_has(real_cluster, vmi, "KUBEVIRT-PY-DISK sda ro=0 found=0 wrote=1\n")
    _wait(lambda: _condition_reason(k, ns, "LiveMigratable") == "HotplugNotLiveMigratable",
          60, "LiveMigratable=False HotplugNotLiveMigratable")  # fmt: skip

    _remove(k, kubeconfig, ns)
    _console_has(real_cluster, vmi, "KUBEVIRT-PY-HOTPLUG-REMOVED sda\n")

    again = _virtctl(kubeconfig, ns, "addvolume", NAME, "--volume-name=hp-disk", "--bus=virtio")
    assert again.returncode == 0, again.stderr
    assert _ready(k, ns)["target"] == "vdb"
    _console_has(real_cluster, vmi, "KUBEVIRT-PY-DISK vdb ro=0 found=1 wrote=2\n")

    node, pod_uid = _pod_uid(vmi)
    pod_dir = real_cluster.config.nodes_dir / node / "kubelet" / "pods" / pod_uid
    assert pod_dir.is_dir()
    k("delete", "vmi", NAME, "-n", ns, "--wait=true", "--timeout=120s")
    _wait(lambda: not pod_dir.exists(), 180, f"{pod_dir} removed by the kubelet")


def test_vm_template_hotplug_is_followed_by_its_vmi_on_real_nodes(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """`addvolume --persist` writes the VM's template; the running VMI follows it and the
    guest sees the disk. The volume then dropped from the template by a plain patch of the
    VM (declarative): the VMI follows again and the guest sees the disk go."""
    k, ns, kubeconfig = real_stack, real_namespace, real_cluster.kubeconfig
    vmi = _vmi()
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": NAME},
        "spec": {"runStrategy": "Always", "template": {"spec": vmi["spec"]}},
    }
    _apply(k, ns, vm)
    running = _running(k, ns, NAME)
    _console_has(real_cluster, running, "KUBEVIRT-PY-TICK 1\n")
    _apply(k, ns, _claim("hp-disk"))
    added = _virtctl(kubeconfig, ns, "addvolume", NAME, "--volume-name=hp-disk", "--persist")
    assert added.returncode == 0, added.stderr
    template = _get(k, ns, "vm", NAME)["spec"]["template"]["spec"]
    assert {"name": "hp-disk", "persistentVolumeClaim": {"claimName": "hp-disk",
            "hotpluggable": True}} in template["volumes"]  # fmt: skip
    assert _ready(k, ns)["target"] == "sda"
    _console_has(real_cluster, running, "KUBEVIRT-PY-DISK sda ro=0 found=0 wrote=1\n")

    index = [v["name"] for v in template["volumes"]].index("hp-disk")
    disk = [d["name"] for d in template["domain"]["devices"]["disks"]].index("hp-disk")
    ops = [
        {"op": "remove", "path": f"/spec/template/spec/volumes/{index}"},
        {"op": "remove", "path": f"/spec/template/spec/domain/devices/disks/{disk}"},
    ]
    k("patch", "vm", NAME, "-n", ns, "--type=json", "-p", json.dumps(ops))
    _wait(lambda: _volume_state(k, ns) is None and not _attachment_pods(k, ns), 180,
          "hp-disk gone from the VMI", lambda: _volume_state(k, ns))  # fmt: skip
    _console_has(real_cluster, running, "KUBEVIRT-PY-HOTPLUG-REMOVED sda\n")
