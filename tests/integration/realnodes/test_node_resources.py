"""Node resources on real nodes (docs/node-resources.md): the test bed's kubelets run the
static CPU manager and advertise the hugepages the cluster reserved on the host; one VM
with dedicated CPUs and hugepages checked on its node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.realnode.noderes import HUGEPAGES_2M
from tests.integration.realnodes.test_node_labels import _get, _launcher, _tiny, _unschedulable
from tests.integration.realnodes.test_story import _wait

pytestmark = pytest.mark.cluster


def _nodes(k: Kubectl) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(k("get", "nodes", "-o", "json"))["items"]
    return items


def test_kubelets_offer_exclusive_cpus_and_hugepages(
    real_cluster: Cluster, real_kubectl: Kubectl
) -> None:
    """Each node advertises 2 MiB hugepages (what the cluster reserved on the host, at
    least) and runs the static CPU manager: one CPU kept out of exclusive use (its
    checkpoint names the policy), 100m of CPU reserved from what pods may request."""
    reserved = real_cluster.config.node_resources.hugepages_2mi
    assert reserved > 0 and int((HUGEPAGES_2M / "nr_hugepages").read_text()) >= reserved
    for node in _nodes(real_kubectl):
        status, name = node["status"], node["metadata"]["name"]
        pages = int(status["capacity"]["hugepages-2Mi"].removesuffix("Mi")) // 2
        assert pages >= reserved, (name, status["capacity"])
        assert status["allocatable"]["cpu"] == "1900m", (name, status["allocatable"])
        state = real_cluster.config.nodes_dir / name / "kubelet" / "cpu_manager_state"
        assert json.loads(Path(state).read_text())["policyName"] == "static", name


# vCPU thread affinity, the container's cpuset and the QEMU threads, read in the compute
# container (the launcher image's python): QEMU's vCPU threads are named "CPU <n>/TCG".
PROBE = r"""
import json, pathlib
cg = pathlib.Path("/sys/fs/cgroup")
f = next(p for p in (cg / "cpuset.cpus.effective", cg / "cpuset/cpuset.effective_cpus") if p.exists())
threads = []
for proc in pathlib.Path("/proc").iterdir():
    if not proc.name.isdigit():
        continue
    try:
        if "qemu-system" not in (proc / "cmdline").read_text():
            continue
        for task in (proc / "task").iterdir():
            status = dict(l.split(":", 1) for l in (task / "status").read_text().splitlines() if ":" in l)
            threads.append([(task / "comm").read_text().strip(), status["Cpus_allowed_list"].strip()])
    except OSError:
        continue
print(json.dumps({"cpuset": f.read_text().strip(), "threads": threads}))
"""


def _free_pages() -> int:
    return int((HUGEPAGES_2M / "free_hugepages").read_text())


def _pinned(k: Kubectl, ns: str, pod: str) -> dict[str, Any] | None:
    out = k("exec", "-n", ns, pod, "-c", "compute", "--", "python3", "-c", PROBE, check=False)
    seen: dict[str, Any] = json.loads(out) if out.strip().startswith("{") else {}
    return seen if any(name.startswith("CPU ") for name, _ in seen.get("threads", [])) else None


def test_dedicated_cpus_and_hugepages_on_one_vm(real_stack: Kubectl, real_namespace: str) -> None:
    """KubeVirt's vmi-fedora-isolated CPU settings as far as one node's one exclusive CPU
    goes, plus 2 MiB hugepages, on the tiny guest: Running in a Guaranteed pod whose compute
    container holds CPUs the kubelet keeps from others (not the reserved CPU 0); the vCPU
    thread's affinity equals that cpuset; the host's free hugepages drop by the guest's 64
    pages and come back after deletion. The isolated variant (one more CPU for the emulator
    thread) asks 2 whole CPUs, which no node here has: it stays Pending, unschedulable."""
    k, ns = real_stack, real_namespace
    before = _free_pages()
    pinned = {
        "cpu": {"cores": 1, "dedicatedCpuPlacement": True},
        "memory": {"guest": "128Mi", "hugepages": {"pageSize": "2Mi"}},
    }
    isolated = {"cpu": {"cores": 1, "dedicatedCpuPlacement": True, "isolateEmulatorThread": True}}
    for name, domain in (("pinned", pinned), ("isolated", isolated)):
        k("apply", "-f", "-", stdin=json.dumps(_tiny(ns, name, domain)))
    _wait(lambda: _get(k, "vmi", ns, "pinned").get("status", {}).get("phase") == "Running",
          300, "pinned Running", lambda: _get(k, "vmi", ns, "pinned").get("status"))  # fmt: skip
    pod = _launcher(k, ns, "pinned")
    assert pod is not None and pod["status"]["qosClass"] == "Guaranteed", pod and pod["status"]
    seen = _wait(lambda: _pinned(k, ns, pod["metadata"]["name"]), 60, "QEMU's vCPU thread")
    cpuset = seen["cpuset"]
    assert cpuset and "0" not in cpuset.replace("-", ",").split(","), seen
    vcpus = [allowed for name, allowed in seen["threads"] if name.startswith("CPU ")]
    assert vcpus == [cpuset], seen
    assert before - _free_pages() == 64, (before, _free_pages())
    cond = _wait(lambda: _unschedulable(k, ns, "isolated"), 120, "isolated Unschedulable")
    assert "Insufficient cpu" in cond["message"], cond
    iso = _launcher(k, ns, "isolated")
    assert iso is not None
    compute = next(c for c in iso["spec"]["containers"] if c["name"] == "compute")
    assert compute["resources"]["requests"]["cpu"] == compute["resources"]["limits"]["cpu"] == "2"
    k("delete", "vmi", "pinned", "-n", ns, "--wait=true", "--timeout=120s")
    _wait(lambda: _free_pages() == before, 120, "hugepages back", _free_pages)
