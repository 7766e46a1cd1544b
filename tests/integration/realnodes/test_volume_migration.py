"""Volume migration on real nodes (`updateVolumesStrategy: Migration`,
docs/volume-migration.md): a running VM's disk on a node-local filesystem claim of the
`local-storage` class is pointed at a Block claim of the CSI class `csi-local`; the
controller starts a live migration with storage copy, the guest moves to the other node
with its disk copied into the block device, and it keeps running: its data is there, its
uptime goes on; then on to a filesystem claim of the CSI class (Block → Filesystem). Before that, a destination smaller than the source is refused with a
condition naming both claims, and the guest stays on its disk."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_block_claims import _domain_disks
from tests.integration.realnodes.test_shared_storage import (
    LIVE_SECTOR,
    _agent_connected,
    _guest_sh,
    _launcher_log_event,
    _pod_name,
    _read,
    _template,
    _write,
)
from tests.integration.realnodes.test_storage import _apply, _disk_lines, _get, _running
from tests.integration.realnodes.test_story import _pod_uid, _wait

pytestmark = pytest.mark.cluster
VM = "volmig"


def _claim(name: str, size: str, *, storage_class: str, block: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                            "resources": {"requests": {"storage": size}}}  # fmt: skip
    if block:
        spec["volumeMode"] = "Block"
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": spec}  # fmt: skip


def _point_at(k: Kubectl, ns: str, claim: str) -> None:
    """Edit the VM: its `data` volume (the template's second) names `claim`."""
    path = "/spec/template/spec/volumes/1/persistentVolumeClaim/claimName"
    patch = [{"op": "replace", "path": path, "value": claim}]
    k("patch", "vm", VM, "-n", ns, "--type=json", "-p", json.dumps(patch))


def _uptime(cluster: Cluster, vmi: dict[str, Any]) -> float:
    return float(_guest_sh(cluster, vmi, "cat /proc/uptime").split()[0])


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    conds = obj.get("status", {}).get("conditions", [])
    return next((c for c in conds if c["type"] == kind), None)


def _volume_claim(vmi: dict[str, Any]) -> str:
    (data,) = [v for v in vmi["spec"]["volumes"] if v["name"] == "data"]
    return str(data["persistentVolumeClaim"]["claimName"])


def test_a_running_vms_disk_moves_to_a_block_claim_of_another_class(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A smaller destination is refused (VM VolumesChange=False naming both claims and
    sizes, no migration, the VMI on its claim); a Block claim of another class is then
    taken: a VMIM annotated kubevirt.io/volume-update-migration moves the same VMI to
    the other node, the source launcher copied vdb, the VMI's migratedVolumes name both
    claims and VolumesChange is gone; the guest reads back the marker it wrote before,
    from a block disk, and its uptime did not reset. Then on to a filesystem claim."""
    k, ns = real_stack, real_namespace
    _apply(k, ns, _claim("volmig-src", "64Mi", storage_class="local-storage"))
    _apply(k, ns, _claim("volmig-small", "16Mi", storage_class="csi-local"))
    _apply(k, ns, _claim("volmig-blk", "1Gi", storage_class="csi-local", block=True))
    vm = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": VM},
          "spec": {"runStrategy": "Always", "updateVolumesStrategy": "Migration",
                   "template": _template("volmig-src")}}  # fmt: skip
    _apply(k, ns, vm)
    first = _running(k, ns, VM)
    assert _disk_lines(real_cluster, first, 1) == ["KUBEVIRT-PY-DISK vdb ro=0 found=0 wrote=1"]
    _agent_connected(k, ns, VM)
    marker = f"KVPY-VOLMIG {uuid.uuid4().hex[:12]}"
    _write(real_cluster, first, LIVE_SECTOR, marker)
    before = _uptime(real_cluster, first)
    source, source_pod = _pod_uid(first)

    _point_at(k, ns, "volmig-small")
    refused = _wait(lambda: _condition(_get(k, ns, "vm", VM), "VolumesChange"), 60,
                    "the refusal", lambda: _get(k, ns, "vm", VM).get("status"))  # fmt: skip
    assert (refused["status"], refused["reason"]) == ("False", "VolumeMigrationRefused")
    assert (
        "destination claim volmig-small (16Mi) is smaller than source claim volmig-src"
        in (refused["message"])
    ), refused
    assert _volume_claim(_get(k, ns, "vmi", VM)) == "volmig-src"
    assert not json.loads(k("get", "vmim", "-n", ns, "-o", "json"))["items"]

    _point_at(k, ns, "volmig-blk")
    moved = _wait(
        lambda: (v := _get(k, ns, "vmi", VM)).get("status", {}).get("nodeName")
        not in (None, source) and v,
        240, "the VMI on the other node", lambda: _get(k, ns, "vmi", VM).get("status"),
    )  # fmt: skip
    assert moved["metadata"]["uid"] == first["metadata"]["uid"]  # the same guest, moved
    (vmim,) = json.loads(k("get", "vmim", "-n", ns, "-o", "json"))["items"]
    assert vmim["metadata"]["annotations"]["kubevirt.io/volume-update-migration"] == VM

    def settled() -> dict[str, Any] | None:
        vmi = _get(k, ns, "vmi", VM)
        return None if _condition(vmi, "VolumesChange") else vmi

    done = _wait(settled, 60, "VolumesChange gone", lambda: _get(k, ns, "vmi", VM).get("status"))
    assert _volume_claim(done) == "volmig-blk"
    (info,) = done["status"]["migratedVolumes"]
    assert info["volumeName"] == "data"
    assert info["sourcePVCInfo"]["claimName"] == "volmig-src"
    assert info["destinationPVCInfo"]["claimName"] == "volmig-blk"
    assert info["destinationPVCInfo"]["volumeMode"] == "Block"
    started = _launcher_log_event(k, ns, _pod_name(k, ns, source_pod), "migration_started")
    assert "vdb" in started["disks"] and "vdb" not in started["shared_disks"], started

    vdb = _domain_disks(real_cluster, moved)["vdb"]
    assert vdb.get("type") == "block"
    assert vdb.find("source").get("dev") == "/dev/vmi-disks/data"  # type: ignore[union-attr]
    assert _read(real_cluster, moved, LIVE_SECTOR) == marker
    assert _uptime(real_cluster, moved) > before  # no reboot: the same guest, still up
    vm_status = _get(k, ns, "vm", VM)["status"]
    assert "volumeUpdateState" not in vm_status, vm_status
    _back_to_a_filesystem_claim(k, real_cluster, moved, marker=marker)


def _back_to_a_filesystem_claim(
    k: Kubectl, cluster: Cluster, vmi: dict[str, Any], *, marker: str
) -> None:
    """Block → Filesystem: the disk moves on to a csi-local filesystem claim, whose
    disk.img the target launcher makes; the guest still reads its marker, still up."""
    ns = vmi["metadata"]["namespace"]
    _apply(k, ns, _claim("volmig-fs", "1Gi", storage_class="csi-local"))
    before = _uptime(cluster, vmi)
    node = vmi["status"]["nodeName"]
    _point_at(k, ns, "volmig-fs")

    def settled() -> dict[str, Any] | None:
        v = _get(k, ns, "vmi", VM)
        moved = v.get("status", {}).get("nodeName") not in (None, node)
        return v if moved and not _condition(v, "VolumesChange") else None

    done = _wait(settled, 240, "the VMI moved to volmig-fs",
                 lambda: _get(k, ns, "vmi", VM).get("status"))  # fmt: skip
    assert _volume_claim(done) == "volmig-fs"
    (info,) = done["status"]["migratedVolumes"]
    assert (info["sourcePVCInfo"]["claimName"], info["destinationPVCInfo"]["claimName"]) == (
        "volmig-blk", "volmig-fs",
    )  # fmt: skip
    assert _domain_disks(cluster, done)["vdb"].get("type") == "file"
    assert _read(cluster, done, LIVE_SECTOR) == marker
    assert _uptime(cluster, done) > before
