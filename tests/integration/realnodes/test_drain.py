"""`kubectl drain` of a real node live-migrates its VMs off it (evictionStrategy
LiveMigrate, set on one VM and the manifests' cluster-wide default for the other): the
eviction webhook marks each VMI for evacuation and answers 429, the evacuation controller
creates a VMIM each, and the retried evictions pass once the launcher pods have ended.
The guests keep running (same VMI, console still ticking) on the other node, and the
drained node is left without launcher pods. The node is uncordoned at the end."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_migration import _last_tick, _private
from tests.integration.realnodes.test_story import REPO, _pod_uid, _wait

pytestmark = pytest.mark.cluster
NAMES = ("drain-a", "drain-b")
EVACUATION_ANNOTATION = "kubevirt.io/evacuationMigration"


def _get(k: Kubectl, ns: str, kind: str, name: str) -> dict[str, Any]:
    out = k("get", kind, name, "-n", ns, "-o", "json", check=False)
    return json.loads(out) if out else {}


def _vm(ns: str, name: str, *, strategy: str | None) -> dict[str, Any]:
    vm: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vm-demo.yaml").read_text())
    vm["metadata"] |= {"name": name, "namespace": ns}
    template = vm["spec"]["template"]
    template["metadata"]["labels"]["kubevirt.io/vm"] = name
    if strategy is not None:
        template["spec"]["evictionStrategy"] = strategy
    return vm


def _nodes(k: Kubectl) -> list[str]:
    out = json.loads(k("get", "nodes", "-o", "json"))
    return sorted(n["metadata"]["name"] for n in out["items"])


def _launchers_on(k: Kubectl, node: str) -> list[str]:
    out = k("get", "pods", "-A", "-l", "kubevirt.io=virt-launcher", "--field-selector",
            f"spec.nodeName={node}", "-o", "json")  # fmt: skip
    return [p["metadata"]["name"] for p in json.loads(out)["items"]]


@pytest.fixture
def cordoned(real_stack: Kubectl) -> Iterator[list[str]]:
    """The cluster's nodes; whatever the test cordons is uncordoned afterwards."""
    nodes = _nodes(real_stack)
    try:
        yield nodes
    finally:
        for node in nodes:
            real_stack("uncordon", node, check=False)


def _ticks_past(cluster: Cluster, node: str, pod: str, tick: int) -> bool:
    return _last_tick(cluster, node, pod) > tick


def _tick_state(k: Kubectl, ns: str, name: str, *, cluster: Cluster, pod: str) -> object:
    """What a guest that stopped ticking after its move shows: the VMI's status, the tail of
    its serial log on the target, its launcher's last lines."""
    status = _get(k, ns, "vmi", name).get("status", {})
    node = status.get("nodeName", "")
    log = _private(cluster, node, pod) / "libvirt" / "log" / "kvpy" / "serial.log"
    serial = log.read_text(errors="replace")[-800:] if log.exists() else f"{log}: missing"
    pods = json.loads(k("get", "pods", "-n", ns, "-o", "json"))["items"]
    names = [p["metadata"]["name"] for p in pods if p["metadata"]["uid"] == pod]
    launcher = k("logs", "-n", ns, *names[:1], "-c", "compute", "--tail", "40", check=False)
    keys = ("phase", "conditions", "migrationState", "nodeName")
    return {
        "status": {key: status.get(key) for key in keys},
        "serial": serial,
        "launcher": launcher,
    }


def _unmarked(k: Kubectl, ns: str, name: str) -> bool:
    return "evacuationNodeName" not in _get(k, ns, "vmi", name).get("status", {})


def _evacuation_state(k: Kubectl, ns: str, name: str) -> object:
    status = _get(k, ns, "vmi", name).get("status", {})
    vmims = json.loads(k("get", "vmim", "-n", ns, "-o", "json"))["items"]
    phases = [(m["metadata"]["name"], m["spec"]["vmiName"], m.get("status", {}).get("phase"))
              for m in vmims]  # fmt: skip
    keys = ("evacuationNodeName", "nodeName", "migrationState")
    return {key: status.get(key) for key in keys}, phases


def _running_on(k: Kubectl, ns: str, name: str, node: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        vmi = _get(k, ns, "vmi", name)
        status = vmi.get("status", {})
        ok = status.get("phase") == "Running" and status.get("nodeName") == node
        return vmi if ok else None

    found: dict[str, Any] = _wait(probe, 300, f"VMI {name} Running on {node}",
                                  lambda: _get(k, ns, "vmi", name).get("status"))  # fmt: skip
    return found


def _drain(k: Kubectl, node: str) -> subprocess.CompletedProcess[str]:
    argv = [str(k.binary), "--kubeconfig", str(k.kubeconfig), "drain", node,
            "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=420s"]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=480, check=False)


def test_drain_live_migrates_vms_off_a_real_node(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str, cordoned: list[str]
) -> None:
    """Two VMs on one real node (the other cordoned while they start); `kubectl drain
    --ignore-daemonsets --delete-emptydir-data` of that node succeeds; each VMI is the same
    object, Running on the other node after an evacuation VMIM that Succeeded, its
    evacuation mark cleared, its console ticking past where it was; the drained node has
    no launcher pod left; each VMI has its PodDisruptionBudget."""
    k, ns = real_stack, real_namespace
    drained, other = cordoned
    k("cordon", other)
    k("apply", "-f", "-", stdin=json.dumps(_vm(ns, NAMES[0], strategy="LiveMigrate")))
    k("apply", "-f", "-", stdin=json.dumps(_vm(ns, NAMES[1], strategy=None)))
    before = {}
    for name in NAMES:
        vmi = _running_on(k, ns, name, drained)
        node, pod = _pod_uid(vmi)
        _wait(partial(_ticks_past, real_cluster, node, pod, 2), 180, f"{name} ticks")
        before[name] = (vmi["metadata"]["uid"], _last_tick(real_cluster, node, pod))
    k("uncordon", other)
    for name in NAMES:
        pdb = f"kubevirt-disruption-budget-{name}"
        _wait(partial(_get, k, ns, "pdb", pdb), 60, f"the PodDisruptionBudget of {name}")

    done = _drain(k, drained)
    if done.returncode != 0:
        logs = k("logs", "-n", "kubevirt", "-l", "kubevirt.io=virt-controller", "--tail", "80",
                 "--prefix", check=False)  # fmt: skip
        vmims = k("get", "vmim", "-n", ns, "-o", "yaml", check=False)
        raise AssertionError(f"drain failed:\n{done.stdout}\n{done.stderr}\n{vmims}\n{logs}")
    assert "evacuation" in done.stdout + done.stderr, done.stdout  # the webhook's 429s

    for name in NAMES:
        vmi = _running_on(k, ns, name, other)
        uid, tick = before[name]
        assert vmi["metadata"]["uid"] == uid, "the same VMI, not a replacement"
        assert vmi["status"]["migrationState"]["completed"] is True
        node, pod = _pod_uid(vmi)
        ticking = partial(_ticks_past, real_cluster, node, pod, tick)
        state = partial(_tick_state, k, ns, name, cluster=real_cluster, pod=pod)
        _wait(ticking, 120, f"{name}'s console ticking on {other}", state)
        _wait(partial(_unmarked, k, ns, name), 60, f"{name}'s evacuation mark cleared",
              partial(_evacuation_state, k, ns, name))  # fmt: skip
        budget = _get(k, ns, "pdb", f"kubevirt-disruption-budget-{name}")
        assert budget["spec"]["selector"]["matchLabels"] == {"kubevirt.io/created-by": uid}
    vmims = json.loads(k("get", "vmim", "-n", ns, "-o", "json"))["items"]
    evacuations = [m for m in vmims if m["metadata"]["annotations"].get(EVACUATION_ANNOTATION)]
    assert {m["spec"]["vmiName"] for m in evacuations} == set(NAMES), vmims
    assert {m["status"]["phase"] for m in evacuations} == {"Succeeded"}, vmims
    assert _launchers_on(k, drained) == []
