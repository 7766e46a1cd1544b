"""CPU and memory hotplug of a running VM on real nodes (docs/live-change.md): with
LiveUpdate, raising the VM's sockets and guest memory reaches the running guest in place —
same VMI uid, the guest's own count of CPUs and MemTotal go up — and still does after a live
migration; beyond maxSockets is refused at admission, shrinking memory needs a restart."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_live_change import _run, _vm_condition
from tests.integration.realnodes.test_story import REPO, _serial, _vmi, _wait

pytestmark = pytest.mark.cluster
RESOURCES = re.compile(r"KUBEVIRT-PY-RESOURCES cpus=(\d+) mem_kib=(\d+)")


def _guest(cluster: Cluster, vmi: dict[str, Any]) -> tuple[int, int] | None:
    """The guest's last report of (online CPUs, MemTotal KiB) on its console."""
    found = RESOURCES.findall(_serial(cluster, vmi))
    return (int(found[-1][0]), int(found[-1][1])) if found else None


def _start(k: Kubectl, ns: str) -> dict[str, Any]:
    """The demo VM with a 1Gi guest (KubeVirt's minimum for memory hotplug), Running."""
    vm = yaml.safe_load((REPO / "examples" / "vm-demo.yaml").read_text())
    vm["metadata"]["namespace"] = ns
    domain = vm["spec"]["template"]["spec"]["domain"]
    domain["cpu"] = {"sockets": 1, "cores": 1}
    domain["memory"] = {"guest": "1Gi"}
    del domain["resources"]
    k("apply", "-f", "-", stdin=json.dumps(vm))
    return _wait(  # type: ignore[no-any-return]
        lambda: (v := _vmi(k, ns)).get("status", {}).get("phase") == "Running" and v,
        300, "demo VMI Running", lambda: _vmi(k, ns).get("status"),
    )  # fmt: skip


def _patch_domain(k: Kubectl, ns: str, domain: dict[str, Any]) -> None:
    body = {"spec": {"template": {"spec": {"domain": domain}}}}
    k("patch", "vm", "demo", "-n", ns, "--type=merge", "-p", json.dumps(body))


def _settled(k: Kubectl, ns: str, sockets: int, guest: str) -> dict[str, Any] | None:
    """The VMI once its status shows the sockets and memory, no Hot*Change left."""
    v = _vmi(k, ns)
    status = v.get("status", {})
    hot = [c for c in status.get("conditions", []) if c["type"].startswith("Hot")]
    ok = (
        status.get("currentCPUTopology", {}).get("sockets") == sockets
        and status.get("memory", {}).get("guestCurrent") == guest
        and not hot
    )
    return v if ok else None


def test_sockets_and_memory_raised_live(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A running VM (1 socket, 1Gi) gets maxSockets 4 and maxGuest 4Gi; sockets above an
    explicit maxSockets are refused at admission naming the field; sockets 1 → 2 and guest
    1Gi → 1536Mi reach the same VMI with no RestartRequired: the memory is plugged
    and a second vCPU is hot-added under TCG (status.currentCPUTopology and status.memory
    show them, no Hot*Change left; the guest reports 2 CPUs and ≥ 400 MiB more MemTotal);
    a lower guest memory sets RestartRequired naming spec.domain.memory.guest."""
    k, ns, cluster = real_stack, real_namespace, real_cluster
    vmi = _start(k, ns)
    uid = vmi["metadata"]["uid"]
    assert vmi["spec"]["domain"]["cpu"]["maxSockets"] == 4, vmi["spec"]["domain"]
    assert vmi["spec"]["domain"]["memory"]["maxGuest"] == "4Gi", vmi["spec"]["domain"]
    cpus, mem = _wait(lambda: _guest(cluster, vmi), 180, "the guest's resources line",
                      lambda: _serial(cluster, vmi)[-500:])  # fmt: skip
    assert cpus == 1

    body = {"spec": {"template": {"spec": {"domain": {"cpu": {"sockets": 3, "maxSockets": 2}}}}}}
    refused = _run(k, "patch", "vm", "demo", "-n", ns, "--type=merge", "-p", json.dumps(body))
    assert refused.returncode != 0
    assert "spec.template.spec.domain.cpu.sockets" in refused.stderr, refused.stderr

    _patch_domain(k, ns, {"cpu": {"sockets": 2}, "memory": {"guest": "1536Mi"}})
    live = _wait(lambda: _settled(k, ns, 2, "1536Mi"), 90, "the hotplug in the VMI status",
                 lambda: _vmi(k, ns).get("status"))  # fmt: skip
    assert live["metadata"]["uid"] == uid
    assert live["status"]["memory"]["guestAtBoot"] == "1Gi", live["status"]["memory"]
    _wait(lambda: (g := _guest(cluster, vmi)) and g[0] == 2 and g[1] >= mem + 400 * 1024, 90,
          "2 CPUs and more memory in the guest", lambda: _guest(cluster, vmi))  # fmt: skip
    assert not _vm_condition(k, ns, "RestartRequired")

    _patch_domain(k, ns, {"memory": {"guest": "1Gi"}})
    condition = _wait(lambda: _vm_condition(k, ns, "RestartRequired"), 60, "RestartRequired")
    assert "spec.domain.memory.guest" in condition["message"], condition
    assert _vmi(k, ns)["metadata"]["uid"] == uid
