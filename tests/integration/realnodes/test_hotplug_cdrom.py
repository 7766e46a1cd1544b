"""DataVolume hotplug and CD-ROM inject/eject on real nodes, on one running VM: a
DataVolume hot-plugged persistently by KubeVirt's own virtctl (v1.8 always writes the VM's
template; the VMI follows) and unplugged by it; a second one hot-plugged into the VMI alone
by `virtctl-py addvolume` (no --persist) and unplugged; then the first one's claim, written by the guest meanwhile,
inserted as the media of the VM's empty CD-ROM by editing the VM (KubeVirt 1.6's
declarative way), read by the guest from /dev/sr0, and ejected again. Bad input: a disk
left without its volume is refused at admission, a non-hotpluggable volume removed sets
RestartRequired naming it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.errors import LocalKubeError
from tests.integration.realnodes.test_hotplug import _vmi as hotplug_vmi
from tests.integration.realnodes.test_shared_storage import _agent_connected, _guest_sh
from tests.integration.realnodes.test_storage import _apply, _get, _running
from tests.integration.realnodes.test_story import _serial, _virtctl, _wait
from tests.integration.realnodes.test_upstream_virtctl import _upstream, upstream_virtctl

pytestmark = pytest.mark.cluster
__all__ = ["upstream_virtctl"]
NAME = "hpcd"
MARKER = "KVPY-CDROM-MARKER"
MEDIA_SECTOR = 8  # where the guest writes the marker: 4096 bytes in, the cdrom's block 2


def _datavolume(name: str) -> dict[str, Any]:
    storage = {"resources": {"requests": {"storage": "16Mi"}}, "storageClassName": "csi-local"}
    return {
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataVolume",
        "metadata": {"name": name},
        "spec": {"source": {"blank": {}}, "storage": storage},
    }


def _vm() -> dict[str, Any]:
    """The tiny guest with an emptyDisk (vda, not hotpluggable) and an empty sata CD-ROM."""
    spec = copy.deepcopy(hotplug_vmi()["spec"])
    spec["domain"]["devices"]["disks"].append({"name": "cd", "cdrom": {"bus": "sata"}})
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": NAME},
        "spec": {"runStrategy": "Always", "template": {"spec": spec}},
    }


def _state(k: Kubectl, ns: str, volume: str) -> dict[str, Any] | None:
    found = _get(k, ns, "vmi", NAME).get("status", {}).get("volumeStatus", [])
    return next((v for v in found if v["name"] == volume), None)


def _ready(k: Kubectl, ns: str, volume: str) -> None:
    _wait(lambda: (_state(k, ns, volume) or {}).get("phase") == "Ready", 240,
          f"{volume} Ready", lambda: _state(k, ns, volume))  # fmt: skip


def _gone(k: Kubectl, ns: str, volume: str) -> None:
    def probe() -> bool:
        vmi = _get(k, ns, "vmi", NAME)
        names = [v["name"] for v in vmi["spec"].get("volumes", [])]
        return volume not in names and _state(k, ns, volume) is None

    _wait(probe, 180, f"{volume} gone from the VMI", lambda: _state(k, ns, volume))


def _console_count(cluster: Cluster, vmi: dict[str, Any], marker: str, count: int) -> None:
    _wait(lambda: _serial(cluster, vmi).count(marker) >= count, 180, f"{count} x {marker}",
          lambda: _serial(cluster, vmi)[-800:])  # fmt: skip


def _template_volumes(k: Kubectl, ns: str) -> list[dict[str, Any]]:
    volumes: list[dict[str, Any]] = _get(k, ns, "vm", NAME)["spec"]["template"]["spec"]["volumes"]
    return volumes


def _patch_vm(k: Kubectl, ns: str, ops: list[dict[str, Any]]) -> None:
    k("patch", "vm", NAME, "-n", ns, "--type=json", "-p", json.dumps(ops))


def _read_cdrom(cluster: Cluster, vmi: dict[str, Any]) -> str:
    """The first line of the cdrom's block 2 as the guest reads it, or `empty`."""
    script = (
        f"dd if=/dev/sr0 bs=2048 skip={MEDIA_SECTOR // 4} count=1 2>/dev/null "
        "| tr -d '\\000' | head -n 1 | grep . || echo empty"
    )
    return _guest_sh(cluster, vmi, script).strip()


def _hotplug_datavolumes(
    k: Kubectl, cluster: Cluster, ns: str, vmi: dict[str, Any], upstream: Path
) -> None:
    """dv-a by KubeVirt's virtctl (v1.8 persists into the VM whenever one owns the VMI: the
    template and the VMI get it; the guest sees vdb and the marker is written on it), then
    removed by it; dv-b by `virtctl-py addvolume` without --persist (the VMI alone)."""
    kubeconfig = cluster.kubeconfig
    _upstream(upstream, kubeconfig, ns, "addvolume", NAME, "--volume-name=dv-a", "--bus=virtio")
    assert {"name": "dv-a", "dataVolume": {"name": "dv-a", "hotpluggable": True}} in (
        _template_volumes(k, ns)
    )
    _ready(k, ns, "dv-a")
    _console_count(cluster, vmi, "KUBEVIRT-PY-DISK vdb ro=0 found=0 wrote=1", 1)
    write = f"printf '{MARKER}\\n' | dd of=/dev/vdb bs=512 seek={MEDIA_SECTOR} conv=notrunc,fsync"
    _guest_sh(cluster, vmi, write)
    _upstream(upstream, kubeconfig, ns, "removevolume", NAME, "--volume-name=dv-a")
    assert all(v["name"] != "dv-a" for v in _template_volumes(k, ns))
    _gone(k, ns, "dv-a")
    _console_count(cluster, vmi, "KUBEVIRT-PY-HOTPLUG-REMOVED vdb", 1)

    done = _virtctl(kubeconfig, ns, "addvolume", NAME, "--volume-name=dv-b", "--bus=virtio")
    assert done.returncode == 0, done.stderr
    _ready(k, ns, "dv-b")
    vmi_volumes = _get(k, ns, "vmi", NAME)["spec"]["volumes"]
    assert {"name": "dv-b", "dataVolume": {"name": "dv-b", "hotpluggable": True}} in vmi_volumes
    assert all(v["name"] != "dv-b" for v in _template_volumes(k, ns))
    _console_count(cluster, vmi, "KUBEVIRT-PY-HOTPLUG-ADDED vdb", 2)
    done = _virtctl(kubeconfig, ns, "removevolume", NAME, "--volume-name=dv-b")
    assert done.returncode == 0, done.stderr
    _gone(k, ns, "dv-b")
    _console_count(cluster, vmi, "KUBEVIRT-PY-HOTPLUG-REMOVED vdb", 2)


def test_datavolume_hotplug_and_cdrom_inject_eject_on_real_nodes(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str, upstream_virtctl: Path
) -> None:
    """Two blank DataVolumes made with the VM, hot-plugged as soon as asked (each attached
    once Succeeded): dv-a by KubeVirt's virtctl, persistent (the template and VMI get a
    hotpluggable dataVolume, Ready, the guest sees vdb and the marker is written on it),
    unplugged by it; dv-b by virtctl-py into the VMI alone, then unplugged. The VM's empty CD-ROM: the
    guest reads no medium; a hotpluggable dataVolume volume `cd` (dv-a) added to the VM's
    template makes it Ready and the guest reads the marker from /dev/sr0; the volume
    removed from the template ejects it (the guest reads no medium, the cdrom disk still in
    the VMI). Then a plain disk left without its volume is refused naming why, and the
    emptyDisk removed with its disk sets RestartRequired naming spec.volumes[name=scratch]."""
    k, ns = real_stack, real_namespace
    for name in ("dv-a", "dv-b"):
        _apply(k, ns, _datavolume(name))
    _apply(k, ns, _vm())
    vmi = _running(k, ns, NAME)
    _agent_connected(k, ns, NAME)
    assert _read_cdrom(real_cluster, vmi) == "empty"

    _hotplug_datavolumes(k, real_cluster, ns, vmi, upstream_virtctl)

    index = len(_template_volumes(k, ns))
    media = {"name": "cd", "dataVolume": {"name": "dv-a", "hotpluggable": True}}
    _patch_vm(k, ns, [{"op": "add", "path": "/spec/template/spec/volumes/-", "value": media}])
    _ready(k, ns, "cd")
    _wait(lambda: _read_cdrom(real_cluster, vmi) == MARKER, 60, "the marker read from sr0",
          lambda: _read_cdrom(real_cluster, vmi))  # fmt: skip
    _patch_vm(k, ns, [{"op": "remove", "path": f"/spec/template/spec/volumes/{index}"}])
    _gone(k, ns, "cd")
    _wait(lambda: _read_cdrom(real_cluster, vmi) == "empty", 60, "sr0 without a medium",
          lambda: _read_cdrom(real_cluster, vmi))  # fmt: skip
    disks = _get(k, ns, "vmi", NAME)["spec"]["domain"]["devices"]["disks"]
    assert {"name": "cd", "cdrom": {"bus": "sata"}} in disks

    with pytest.raises(LocalKubeError, match="only a cdrom may have none"):
        _patch_vm(k, ns, [{"op": "remove", "path": "/spec/template/spec/volumes/0"}])
    _patch_vm(k, ns, [
        {"op": "remove", "path": "/spec/template/spec/volumes/0"},
        {"op": "remove", "path": "/spec/template/spec/domain/devices/disks/0"},
    ])  # fmt: skip

    def restart_required() -> str:
        conds = _get(k, ns, "vm", NAME).get("status", {}).get("conditions", [])
        found = [c for c in conds if c["type"] == "RestartRequired" and c["status"] == "True"]
        return str(found[0].get("message", "")) if found else ""

    message = _wait(restart_required, 60, "RestartRequired on the VM")
    assert "spec.volumes[name=scratch]: volume 'scratch' removed, but it is not hotpluggable" in (
        message
    )
    k("delete", "vm", NAME, "-n", ns, "--wait=true", "--timeout=120s")
