"""Claims of the local cluster's CSI class under a running guest, on real nodes.

ExpandDisks (KubeVirt's feature gate, on in the KubeVirt CR): `kubectl patch pvc` to a
bigger size grows the claim (the CSI class expands it), the controller carries the new
capacity into the VMI's volumeStatus, the handler asks the launcher, which grows disk.img
and tells QEMU: the guest's /sys/block/vdb/size grows with no restart. Shrinking a claim is
refused by Kubernetes itself. Then the same guest live-migrates with a ReadWriteMany
**Block** claim: the target pod has the device too, the destination XML keeps it a block
disk, and what the guest wrote on it before is read on the other node."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from shared.model.quantity import parse_bytes
from tests.integration.realnodes.test_live_change import _patch_kv, _run, kv_restored
from tests.integration.realnodes.test_shared_storage import (
    _agent_connected,
    _claim,
    _guest_sh,
    _moved,
    _template,
)
from tests.integration.realnodes.test_storage import _apply, _get, _running
from tests.integration.realnodes.test_story import _wait

pytestmark = pytest.mark.cluster
__all__ = ["kv_restored"]  # the fixture, used by name below
SECTORS_64MI, SECTORS_128MI = 64 * 2048, 128 * 2048
MARK_SECTOR = 8


def _sectors(cluster: Cluster, vmi: dict[str, Any]) -> int:
    return int(_guest_sh(cluster, vmi, "cat /sys/block/vdb/size").strip())


def _capacity(k: Kubectl, ns: str) -> int:
    """The claim volume's capacity in the VMI's volumeStatus, in bytes (0: not there)."""
    entries = _get(k, ns, "vmi", "grow").get("status", {}).get("volumeStatus", [])
    found: dict[str, Any] = next((e for e in entries if e["name"] == "data"), {})
    storage = found.get("persistentVolumeClaimInfo", {}).get("capacity", {}).get("storage")
    return parse_bytes(storage) if storage else 0


def _vmi() -> dict[str, Any]:
    """The tiny guest with the Filesystem claim `grow` as vdb and the Block claim `blk`
    as vdc, both ReadWriteMany."""
    spec = _template("grow")["spec"]
    spec["domain"]["devices"]["disks"].append({"name": "blk", "disk": {"bus": "virtio"}})
    spec["volumes"].append({"name": "blk", "persistentVolumeClaim": {"claimName": "blk"}})
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "grow"}, "spec": spec}  # fmt: skip


def _read_mark(cluster: Cluster, vmi: dict[str, Any]) -> str:
    script = (
        "sync; echo 3 >/proc/sys/vm/drop_caches; "
        f"dd if=/dev/vdc bs=512 skip={MARK_SECTOR} count=1 2>/dev/null | tr -d '\\000' | head -n 1"
    )
    return _guest_sh(cluster, vmi, script).strip()


def _expand(k: Kubectl, ns: str, cluster: Cluster, running: dict[str, Any]) -> None:
    """Shrinking refused; growing to 128Mi seen in volumeStatus and by the guest."""

    def resize(size: str) -> Any:
        body = json.dumps({"spec": {"resources": {"requests": {"storage": size}}}})
        return _run(k, "patch", "pvc", "grow", "-n", ns, "--type=merge", "-p", body)

    assert _sectors(cluster, running) == SECTORS_64MI
    shrink = resize("32Mi")
    assert shrink.returncode != 0
    assert "spec.resources.requests.storage" in shrink.stderr, shrink.stderr
    grow = resize("128Mi")
    assert grow.returncode == 0, grow.stderr
    _wait(lambda: _capacity(k, ns) == 128 << 20, 120, "the VMI's volumeStatus at 128Mi",
          lambda: (_get(k, ns, "pvc", "grow").get("status"), _capacity(k, ns)))  # fmt: skip
    _wait(lambda: _sectors(cluster, running) == SECTORS_128MI, 60,
          "the guest seeing a 128 MiB vdb", lambda: _sectors(cluster, running))  # fmt: skip


def test_a_claim_grows_under_the_guest_which_then_migrates_with_a_block_claim(
    kv_restored: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """ExpandDisks on; a VMI on a 64Mi csi-local claim (vdb) and a 64Mi RWX Block claim
    (vdc) sees a 64 MiB vdb. Shrinking the claim is refused naming the field; growing it
    to 128Mi: the VMI's volumeStatus says 128Mi and the running guest sees a 128 MiB vdb
    (same VMI, no restart). A mark written on vdc, then a live migration: the same guest
    on the other node reads the mark from the block claim and still sees 128 MiB."""
    k, ns = kv_restored, real_namespace
    kv = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))
    gates = kv["spec"]["configuration"].get("developerConfiguration", {}).get("featureGates", [])
    _patch_kv(k, {"developerConfiguration": {"featureGates": [*gates, "ExpandDisks"]}})
    _apply(k, ns, _claim("grow", mode="ReadWriteMany", storage_class="csi-local"))
    blk = _claim("blk", mode="ReadWriteMany", storage_class="csi-local")
    blk["spec"]["volumeMode"] = "Block"
    _apply(k, ns, blk)
    _apply(k, ns, _vmi())
    running = _running(k, ns, "grow")
    _agent_connected(k, ns, "grow")
    _expand(k, ns, real_cluster, running)

    mark = f"KVPY-BLK {uuid.uuid4().hex[:12]}"
    _guest_sh(real_cluster, running,
              f"printf '{mark}\\n' | dd of=/dev/vdc bs=512 seek={MARK_SECTOR} conv=notrunc,fsync")  # fmt: skip
    _wait(lambda: any(c["type"] == "LiveMigratable" and c["status"] == "True"
                      for c in _get(k, ns, "vmi", "grow")["status"].get("conditions", [])),
          60, "LiveMigratable=True", lambda: _get(k, ns, "vmi", "grow")["status"])  # fmt: skip
    source = running["status"]["nodeName"]
    _apply(k, ns, {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
                   "metadata": {"name": "move"}, "spec": {"vmiName": "grow"}})  # fmt: skip
    _wait(lambda: _get(k, ns, "vmim", "move").get("status", {}).get("phase") == "Succeeded",
          240, "the migration Succeeded", lambda: _get(k, ns, "vmim", "move").get("status"))  # fmt: skip
    moved = _moved(k, ns, "grow", source)
    assert moved["metadata"]["uid"] == running["metadata"]["uid"]
    assert _read_mark(real_cluster, moved) == mark
    assert _sectors(real_cluster, moved) == SECTORS_128MI
