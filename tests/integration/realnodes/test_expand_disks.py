"""A claim expanded under a running guest, on real nodes (KubeVirt's ExpandDisks): with
the gate on in the KubeVirt CR, `kubectl patch pvc` to a bigger size grows the claim (the
local cluster's CSI class expands it), the controller carries the new capacity into the
VMI's volumeStatus, the handler asks the launcher, and the launcher grows disk.img and
tells QEMU: the guest's /sys/block/vdb/size grows with no restart. Shrinking a claim is
refused by Kubernetes itself."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_live_change import _patch_kv, _run, kv_restored
from tests.integration.realnodes.test_shared_storage import (
    _agent_connected,
    _claim,
    _guest_sh,
    _template,
)
from tests.integration.realnodes.test_storage import _apply, _get, _running
from tests.integration.realnodes.test_story import _wait

pytestmark = pytest.mark.cluster
__all__ = ["kv_restored"]  # the fixture, used by name below
SECTORS_64MI, SECTORS_128MI = 64 * 2048, 128 * 2048


def _sectors(cluster: Cluster, vmi: dict[str, Any]) -> int:
    return int(_guest_sh(cluster, vmi, "cat /sys/block/vdb/size").strip())


def _capacity(k: Kubectl, ns: str) -> str:
    entries = _get(k, ns, "vmi", "grow").get("status", {}).get("volumeStatus", [])
    found: dict[str, Any] = next((e for e in entries if e["name"] == "data"), {})
    return str(found.get("persistentVolumeClaimInfo", {}).get("capacity", {}).get("storage"))


def test_a_claim_expanded_under_a_running_guest_is_seen_by_the_guest(
    kv_restored: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """ExpandDisks on; a VMI on a 64Mi csi-local claim sees a 64 MiB vdb. Shrinking the
    claim is refused naming the field; growing it to 128Mi: the VMI's volumeStatus says
    128Mi and the running guest sees a 128 MiB vdb (same VMI, no restart)."""
    k, ns = kv_restored, real_namespace
    kv = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))
    gates = kv["spec"]["configuration"].get("developerConfiguration", {}).get("featureGates", [])
    _patch_kv(k, {"developerConfiguration": {"featureGates": [*gates, "ExpandDisks"]}})
    _apply(k, ns, _claim("grow", mode="ReadWriteOnce", storage_class="csi-local"))
    vmi = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
           "metadata": {"name": "grow"}, "spec": _template("grow")["spec"]}  # fmt: skip
    _apply(k, ns, vmi)
    running = _running(k, ns, "grow")
    _agent_connected(k, ns, "grow")
    assert _sectors(real_cluster, running) == SECTORS_64MI

    def resize(size: str) -> Any:
        body = json.dumps({"spec": {"resources": {"requests": {"storage": size}}}})
        return _run(k, "patch", "pvc", "grow", "-n", ns, "--type=merge", "-p", body)

    shrink = resize("32Mi")
    assert shrink.returncode != 0
    assert "spec.resources.requests.storage" in shrink.stderr, shrink.stderr
    grow = resize("128Mi")
    assert grow.returncode == 0, grow.stderr
    _wait(lambda: _capacity(k, ns) == "128Mi", 120, "the VMI's volumeStatus at 128Mi",
          lambda: _get(k, ns, "pvc", "grow").get("status"))  # fmt: skip
    _wait(lambda: _sectors(real_cluster, running) == SECTORS_128MI, 60,
          "the guest seeing a 128 MiB vdb", lambda: _sectors(real_cluster, running))  # fmt: skip
    assert _get(k, ns, "vmi", "grow")["metadata"]["uid"] == running["metadata"]["uid"]
