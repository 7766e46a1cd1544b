"""A real Prometheus on the real-node cluster (localkube/prometheus.py: Debian's binary,
configured from manifests/base/monitoring's ServiceMonitor and PrometheusRule; scrape every
3 s, evaluation every 2 s and every alert's `for` capped at 5 s so that alerts fire within
seconds of their cause). It scrapes both daemons over HTTPS with the operator's target
labels; once a VM runs and migrated, every recording rule yields a series and every
dashboard panel's query returns data; alerts a local cluster can provoke (a VM stuck in
ErrImagePull, a failed migration, the virt-handlers gone from the nodes while a VMI runs)
fire with their runbook and resolve."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import urllib.parse
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.promconfig import PrometheusOptions
from localkube.prometheus import LocalPrometheus
from tests.integration.realnodes.test_bad_image import apply_missing_image_demo
from tests.integration.realnodes.test_migration_failures import (
    _migrating,
    _rollout,
    _target_qemu,
    _vmim,
    migrations_slowed,
)
from tests.integration.realnodes.test_story import (
    REPO,
    _condition,
    _virtctl,
    _vmi,
    _wait,
    start_demo,
)

pytestmark = pytest.mark.cluster
MONITORING = REPO / "manifests" / "base" / "monitoring"
RUNBOOKS = (REPO / "docs" / "monitoring.md").read_text()
FOR_CAP = "5s"  # every alert's `for` (2 evaluations at least: a pending alert is still seen)


class Api:
    """Prometheus' HTTP API (loopback)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.get("/api/v1/query", query=expr)["result"]
        return result

    def alerts(self, name: str) -> list[dict[str, Any]]:
        return [a for a in self.get("/api/v1/alerts")["alerts"] if a["labels"]["alertname"] == name]

    def firing(self, name: str, /, **labels: str) -> dict[str, Any] | None:
        for a in self.alerts(name):
            if a["state"] == "firing" and labels.items() <= a["labels"].items():
                return a
        return None


@pytest.fixture(scope="module")
def prom(real_stack: Kubectl, real_cluster: Cluster) -> Iterator[Api]:
    """The cluster's Prometheus, started for this module and stopped after it."""
    options = PrometheusOptions(scrape_interval="3s", evaluation_interval="2s", for_cap=FOR_CAP)
    local = LocalPrometheus(real_cluster, options)
    try:
        yield Api(asyncio.run(local.up()))
    finally:
        asyncio.run(local.down())


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    return [r for g in doc["spec"]["groups"] for r in g["rules"]]


def _panel_queries() -> list[str]:
    doc = json.loads((MONITORING / "kubevirt-py-dashboard.json").read_text())
    return [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]


def _targets_up(api: Api) -> dict[str, int]:
    active = api.get("/api/v1/targets", state="active")["activeTargets"]
    up: dict[str, int] = {}
    for t in active:
        if t["health"] == "up":
            up[t["labels"]["job"]] = up.get(t["labels"]["job"], 0) + 1
    return up


def _empty(api: Api, exprs: list[str]) -> list[str]:
    return [e for e in exprs if not api.query(e)]


def test_both_daemons_scraped_every_rule_and_panel_has_data(
    prom: Api, real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """Both controllers and both handlers are scraped up (job = their Service, labels pod,
    namespace, service, endpoint, container as the operator sets them; a VMI's own
    namespace kept by honorLabels); with the demo VM running and migrated once, every
    rule evaluates without error, every recording rule yields a series and every dashboard
    panel's query returns data."""
    k, ns = real_stack, real_namespace
    _wait(
        lambda: _targets_up(prom) == {"virt-controller-metrics": 2, "virt-handler-metrics": 2},
        120, "both controllers and both handlers scraped up", partial(_targets_up, prom),
    )  # fmt: skip
    (up,) = prom.query('up{job="virt-handler-metrics"} == 1')[:1]
    labels = up["metric"]
    assert labels["namespace"] == "kubevirt" and labels["pod"].startswith("virt-handler-")
    assert (labels["service"], labels["endpoint"]) == ("virt-handler-metrics", "metrics")
    assert labels["container"], labels

    start_demo(k, ns)
    # The interface counters come from the guest agent (user networking): seen before the
    # migration, their rate over 5 min stays non-empty across it.
    _wait(lambda: _condition(_vmi(k, ns), "AgentConnected") == "True", 300,
          "the guest agent connected", lambda: _vmi(k, ns).get("status"))  # fmt: skip
    network = [e for e in _panel_queries() if "kubevirt_vmi_network_" in e]
    _wait(lambda: not _empty(prom, network), 180, "the network panels' data",
          partial(_empty, prom, network), interval=2)  # fmt: skip
    done = _virtctl(real_cluster.kubeconfig, ns, "migrate", "demo", "--wait", "--timeout", "240")
    assert done.returncode == 0, done.stderr
    _wait(lambda: prom.query(f'kubevirt_vmi_info{{namespace="{ns}", name="demo"}}'),
          60, "the demo VMI's info in its own namespace")  # fmt: skip

    records = [r["record"] for r in _rules() if "record" in r]
    exprs = [*records, *_panel_queries()]
    _wait(lambda: not _empty(prom, exprs), 300, "every recorded series and panel query",
          partial(_empty, prom, exprs), interval=2)  # fmt: skip
    groups = prom.get("/api/v1/rules")["groups"]
    evaluated = [r for g in groups for r in g["rules"]]
    assert len(evaluated) == len(_rules())
    assert all(r["health"] == "ok" for r in evaluated), [
        r for r in evaluated if r["health"] != "ok"
    ]


def _check_runbook(alert: dict[str, Any]) -> None:
    """The alert's annotations: summary, description, and a runbook section with text."""
    notes = alert["annotations"]
    assert notes["summary"] and notes["description"], notes
    name = alert["labels"]["alertname"]
    assert notes["runbook_url"] == f"docs/monitoring.md#{name.lower()}", notes
    assert re.search(rf"^### {name}\n\n\S", RUNBOOKS, flags=re.MULTILINE), name


def _fires(api: Api, name: str, /, **labels: str) -> dict[str, Any]:
    alert: dict[str, Any] = _wait(
        lambda: api.firing(name, **labels), 240, f"{name} firing", partial(api.alerts, name),
        interval=2,
    )  # fmt: skip
    _check_runbook(alert)
    return alert


def _resolves(api: Api, name: str, /, **labels: str) -> None:
    def gone() -> bool:
        return not [a for a in api.alerts(name) if labels.items() <= a["labels"].items()]

    _wait(gone, 240, f"{name} resolved", partial(api.alerts, name), interval=2)


def test_a_vm_stuck_in_errimagepull_alerts_until_deleted(
    prom: Api, real_stack: Kubectl, real_namespace: str
) -> None:
    """A VM whose containerDisk image is missing stays not Running (ErrImagePull):
    KubeVirtVMStuckInErrorState fires for it with its runbook; deleting the VM resolves it."""
    k, ns = real_stack, real_namespace
    apply_missing_image_demo(k, ns)
    alert = _fires(prom, "KubeVirtVMStuckInErrorState", namespace=ns, name="demo")
    assert alert["labels"]["severity"] == "warning"
    assert alert["annotations"]["summary"].startswith(f"VirtualMachine {ns}/demo ")
    k("delete", "vm", "demo", "-n", ns, "--wait=true", "--timeout=120s")
    _resolves(prom, "KubeVirtVMStuckInErrorState", namespace=ns, name="demo")


def _kill_target(k: Kubectl, ns: str, vmim: dict[str, Any]) -> None:
    for pid in _wait(partial(_target_qemu, k, ns, vmim), 60, "the target's QEMU"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_a_failed_migration_and_missing_handlers_alert_and_resolve(
    prom: Api, real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A migration whose target QEMU dies ends Failed: KubeVirtVMIMigrationFailed fires for
    the VMIM, and resolves once the VMIM is deleted. Then the handler DaemonSet selects no
    node while the VMI runs: VirtHandlerDown fires, and OrphanedVirtualMachineInstances for
    the VMI's node; with the handlers back both resolve. (The handlers leave as soon as the
    VMIM failed, so the three alerts' `for` windows run at once, not one after another.)"""
    k, ns = real_stack, real_namespace
    with migrations_slowed(k):
        vmi = start_demo(k, ns)
        vmim = _migrating(k, real_cluster, ns)
        _kill_target(k, ns, vmim)
        _wait(lambda: _vmim(k, ns).get("status", {}).get("phase") == "Failed", 240,
              "the VMIM Failed", lambda: _vmim(k, ns).get("status"))  # fmt: skip
    name = vmim["metadata"]["name"]
    node = _vmi(k, ns)["status"]["nodeName"]
    assert node == vmi["status"]["nodeName"]
    away = {"spec": {"template": {"spec": {"nodeSelector": {"kubevirt-py.test/none": "x"}}}}}
    k("patch", "ds/virt-handler", "-n", "kubevirt", "--type=strategic", "-p", json.dumps(away))
    try:
        _fires(prom, "KubeVirtVMIMigrationFailed", namespace=ns, vmi="demo", vmim=name)
        _fires(prom, "VirtHandlerDown")
        _fires(prom, "OrphanedVirtualMachineInstances", node=node)
    finally:
        back = [{"op": "remove", "path": "/spec/template/spec/nodeSelector/kubevirt-py.test~1none"}]
        k("patch", "ds/virt-handler", "-n", "kubevirt", "--type=json", "-p", json.dumps(back))
        _rollout(k)
    k("delete", "vmim", name, "-n", ns, "--wait=true", "--timeout=60s")
    _resolves(prom, "KubeVirtVMIMigrationFailed", namespace=ns, vmim=name)
    _resolves(prom, "VirtHandlerDown")
    _resolves(prom, "OrphanedVirtualMachineInstances", node=node)
    assert _vmi(k, ns)["status"]["phase"] == "Running"


def test_prometheus_files_live_in_the_clusters_state_dir(prom: Api, real_cluster: Cluster) -> None:
    """Its config, rule file and targets are derived files in <state>/prometheus; the rule
    file holds every rule of the PrometheusRule, alerts' `for` capped at 5 s; the targets
    of the Services the ServiceMonitor selects are the two daemons'."""
    root = Path(real_cluster.paths.root) / "prometheus"
    rules = yaml.safe_load((root / "kubevirt-py.rules.yaml").read_text())
    loaded = [r for g in rules["groups"] for r in g["rules"]]
    assert [r.get("record") or r["alert"] for r in loaded] == [
        r.get("record") or r["alert"] for r in _rules()
    ]
    assert {r["for"] for r in loaded if "for" in r} == {FOR_CAP}

    def selected() -> set[str]:
        return {
            t["labels"]["__meta_kubernetes_service_name"]
            for t in json.loads((root / "targets.json").read_text())  # every Service listed
            if t["labels"].get("__meta_kubernetes_service_label_kubevirt_io_metrics") == "true"
        }

    want = {"virt-controller-metrics", "virt-handler-metrics"}
    _wait(lambda: selected() == want, 60, "the daemons' Services in the discovery file", selected)
