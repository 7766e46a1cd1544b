"""The local Prometheus' configuration derived from the monitoring manifests: Prometheus'
own `promtool check config` accepts it; it keeps the ServiceMonitor's HTTPS, TLS settings,
honorLabels, selector and port; the test bed's `for` cap shortens alerts only."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.promconfig import (
    MonitoringManifestError,
    PrometheusOptions,
    load_manifest,
    monitored_namespaces,
    prometheus_config,
    rule_file,
    scrape_configs,
    seconds,
)
from localkube.promsd import target_groups


def _write(tmp_path: Path, options: PrometheusOptions) -> Path:
    targets = tmp_path / "targets.json"
    targets.write_text("[]\n")
    rules = tmp_path / "rules.yaml"
    rule = load_manifest("prometheusrule.yaml")
    rules.write_text(yaml.safe_dump(rule_file(rule, for_cap=options.for_cap)))
    config = tmp_path / "prometheus.yml"
    doc = prometheus_config(targets_file=targets, rules_path=rules, options=options)
    config.write_text(yaml.safe_dump(doc))
    return config


def test_promtool_accepts_the_derived_config(tmp_path: Path) -> None:
    """`promtool check config` passes on the config and its rule file (for-capped too)."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: install Debian's prometheus package (kv_ensure_apt)"
    config = _write(tmp_path, PrometheusOptions(scrape_interval="5s", for_cap="20s"))
    done = subprocess.run(
        [promtool, "check", "config", str(config)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr


def test_scrape_job_keeps_the_service_monitors_settings(tmp_path: Path) -> None:
    """HTTPS, insecure TLS as the ServiceMonitor says, honor_labels, only Services with the
    selector's label and only the `metrics` port, the operator's target labels."""
    monitor = load_manifest("servicemonitor.yaml")
    targets = tmp_path / "targets.json"
    (job,) = scrape_configs(monitor, targets_file=targets, options=PrometheusOptions())
    assert job["job_name"] == "serviceMonitor/kubevirt/kubevirt-py/0"
    assert job["honor_labels"] is True and job["scheme"] == "https"
    assert job["tls_config"] == {"insecure_skip_verify": True}
    assert job["scrape_interval"] == "30s"
    assert job["file_sd_configs"][0]["files"] == [str(targets)]
    assert monitored_namespaces(monitor) == ["kubevirt"]
    keeps = [r for r in job["relabel_configs"] if r.get("action") == "keep"]
    assert keeps[0]["source_labels"][0] == "__meta_kubernetes_service_label_kubevirt_io_metrics"
    assert keeps[0]["regex"] == "(true);true"
    assert keeps[1]["regex"] == "metrics"
    labels = {r.get("target_label") for r in job["relabel_configs"]}
    assert {"namespace", "service", "pod", "container", "job", "endpoint"} <= labels


def test_for_cap_shortens_only_longer_alerts() -> None:
    """A 10m `for` becomes the cap; recording rules and shorter `for`s are unchanged."""
    rule: dict[str, Any] = {"spec": {"groups": [{"name": "g", "rules": [
        {"record": "r", "expr": "up"},
        {"alert": "Long", "expr": "up == 0", "for": "10m"},
        {"alert": "Short", "expr": "up == 0", "for": "10s"},
    ]}]}}  # fmt: skip
    (group,) = rule_file(rule, for_cap="30s")["groups"]
    assert [r.get("for") for r in group["rules"]] == [None, "30s", "10s"]
    assert rule["spec"]["groups"][0]["rules"][1]["for"] == "10m"  # the manifest is untouched


def test_unsupported_settings_are_refused_by_name() -> None:
    """A ServiceMonitor setting the local Prometheus cannot reproduce is a named error."""
    monitor = load_manifest("servicemonitor.yaml")
    monitor["spec"]["endpoints"][0]["tlsConfig"] = {"ca": {"secret": {"name": "x"}}}
    with pytest.raises(MonitoringManifestError, match="tlsConfig"):
        scrape_configs(monitor, targets_file=Path("t"), options=PrometheusOptions())
    assert seconds("1h30m") == 5400
    with pytest.raises(MonitoringManifestError, match="duration"):
        seconds("5 minutes")


def test_discovery_gives_the_endpointslice_roles_meta_labels() -> None:
    """An EndpointSlice of a labelled Service with one ready Pod endpoint becomes one target
    `ip:port` with the meta labels the operator's relabelling reads (service label and
    presence, port name, target kind/name, pod name, phase and container)."""
    es = {
        "metadata": {"namespace": "kubevirt", "name": "virt-handler-metrics-x",
                     "labels": {"kubernetes.io/service-name": "virt-handler-metrics"}},
        "addressType": "IPv4",
        "ports": [{"name": "metrics", "port": 8443, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["198.18.1.5"], "conditions": {"ready": True},
                       "targetRef": {"kind": "Pod", "name": "virt-handler-abc"}}],
    }  # fmt: skip
    service = {"metadata": {"namespace": "kubevirt", "name": "virt-handler-metrics",
                            "labels": {"kubevirt.io/metrics": "true"}}}  # fmt: skip
    pod = {
        "metadata": {"namespace": "kubevirt", "name": "virt-handler-abc"},
        "spec": {"nodeName": "node01", "containers": [
            {"name": "virt-handler", "ports": [{"name": "metrics", "containerPort": 8443}]}]},
        "status": {"phase": "Running", "podIP": "198.18.1.5"},
    }  # fmt: skip
    (target,) = target_groups([es], [service], [pod])
    assert target["targets"] == ["198.18.1.5:8443"]
    m = "__meta_kubernetes_"
    assert (
        target["labels"]
        | {
            f"{m}namespace": "kubevirt",
            f"{m}service_name": "virt-handler-metrics",
            f"{m}service_label_kubevirt_io_metrics": "true",
            f"{m}service_labelpresent_kubevirt_io_metrics": "true",
            f"{m}endpointslice_port_name": "metrics",
            f"{m}endpointslice_address_target_kind": "Pod",
            f"{m}endpointslice_address_target_name": "virt-handler-abc",
            f"{m}endpointslice_endpoint_conditions_ready": "true",
            f"{m}pod_name": "virt-handler-abc",
            f"{m}pod_phase": "Running",
            f"{m}pod_node_name": "node01",
            f"{m}pod_container_name": "virt-handler",
        }
        == target["labels"]
    )
