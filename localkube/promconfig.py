"""The local Prometheus' configuration, derived from the shipped monitoring manifests.

What the Prometheus Operator would generate for manifests/base/monitoring, without the
operator: one scrape job per ServiceMonitor endpoint (its scheme, path, interval, TLS
settings and ``honorLabels``, its relabelings) behind the operator's own relabelling for the
EndpointSlice discovery role (keep the selected Services and the named port, then
``namespace``, ``service``, ``pod``, ``container``, ``job`` and ``endpoint`` target labels),
and the PrometheusRule's groups as a rule file. Debian's prometheus has no Kubernetes
discovery: the targets come from a file that localkube/promsd.py keeps current, with the
meta labels that discovery would give them. The test bed may shorten the scrape and
evaluation intervals and cap every alert's ``for`` so that alerts fire within a test.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from localkube.config import REPO
from localkube.errors import LocalKubeError

MONITORING = REPO / "manifests" / "base" / "monitoring"
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_TLS_KEYS = {"insecureSkipVerify": "insecure_skip_verify", "serverName": "server_name"}
_RELABEL_KEYS = {
    "sourceLabels": "source_labels", "separator": "separator", "targetLabel": "target_label",
    "regex": "regex", "modulus": "modulus", "replacement": "replacement", "action": "action",
}  # fmt: skip


class MonitoringManifestError(LocalKubeError):
    """A monitoring manifest uses something the local Prometheus cannot reproduce."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PrometheusOptions:
    """``scrape_interval``/``evaluation_interval`` override the manifests' (None keeps
    the ServiceMonitor's interval); ``for_cap`` caps every alert's ``for``."""

    scrape_interval: str | None = None
    evaluation_interval: str = "15s"
    for_cap: str | None = None


def seconds(duration: str) -> int:
    """A Prometheus duration of hours/minutes/seconds ("1h30m", "10m", "20s")."""
    m = _DURATION.match(duration)
    if not duration or m is None:
        raise MonitoringManifestError(f"unsupported duration {duration!r}")
    h, mi, s = (int(g or 0) for g in m.groups())
    return h * 3600 + mi * 60 + s


def load_manifest(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((MONITORING / name).read_text())
    return doc


def _label_name(key: str) -> str:
    """A Kubernetes label key as Prometheus' meta label suffix (kubevirt.io/x -> kubevirt_io_x)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


def _selector_relabels(selector: Mapping[str, Any]) -> list[dict[str, Any]]:
    if selector.get("matchExpressions"):
        raise MonitoringManifestError("ServiceMonitor selector.matchExpressions is not supported")
    rules = []
    for key, value in sorted(selector.get("matchLabels", {}).items()):
        name = _label_name(key)
        rules.append(
            {
                "action": "keep",
                "source_labels": [
                    f"__meta_kubernetes_service_label_{name}",
                    f"__meta_kubernetes_service_labelpresent_{name}",
                ],
                "regex": f"({value});true",
            }
        )
    return rules


def _converted(items: list[Mapping[str, Any]], field: str) -> list[dict[str, Any]]:
    out = []
    for item in items:
        unknown = set(item) - set(_RELABEL_KEYS)
        if unknown:
            raise MonitoringManifestError(f"{field}: unsupported keys {sorted(unknown)}")
        out.append({_RELABEL_KEYS[k]: v for k, v in item.items()})
    return out


def _tls(endpoint: Mapping[str, Any]) -> dict[str, Any]:
    tls = endpoint.get("tlsConfig", {})
    unknown = set(tls) - set(_TLS_KEYS)
    if unknown:
        raise MonitoringManifestError(f"endpoints[].tlsConfig: unsupported keys {sorted(unknown)}")
    return {_TLS_KEYS[k]: v for k, v in tls.items()}


def _target_relabels(port: str) -> list[dict[str, Any]]:
    """The operator's target labels for the EndpointSlice role."""
    target = [
        "__meta_kubernetes_endpointslice_address_target_kind",
        "__meta_kubernetes_endpointslice_address_target_name",
    ]
    return [
        {"action": "keep", "source_labels": ["__meta_kubernetes_endpointslice_port_name"],
         "regex": port},
        {"source_labels": target, "separator": ";", "regex": "Node;(.*)",
         "replacement": "${1}", "target_label": "node"},
        {"source_labels": target, "separator": ";", "regex": "Pod;(.*)",
         "replacement": "${1}", "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"action": "drop", "source_labels": ["__meta_kubernetes_pod_phase"],
         "regex": "(Failed|Succeeded)"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job",
         "replacement": "${1}"},
        {"target_label": "endpoint", "replacement": port},
    ]  # fmt: skip


def monitored_namespaces(monitor: Mapping[str, Any]) -> list[str]:
    """The namespaces whose EndpointSlices the ServiceMonitor selects from."""
    selector = monitor["spec"].get("namespaceSelector", {})
    if selector.get("any"):
        raise MonitoringManifestError("namespaceSelector.any is not supported")
    return list(selector.get("matchNames") or [monitor["metadata"]["namespace"]])


def scrape_configs(
    monitor: Mapping[str, Any], *, targets_file: Path, options: PrometheusOptions
) -> list[dict[str, Any]]:
    """One scrape job per endpoint of the ServiceMonitor ``monitor``."""
    meta, spec = monitor["metadata"], monitor["spec"]
    jobs = []
    for i, endpoint in enumerate(spec["endpoints"]):
        if "port" not in endpoint:
            raise MonitoringManifestError(f"endpoints[{i}]: only named ports are supported")
        interval = options.scrape_interval or endpoint.get("interval", "30s")
        relabels = [
            *_selector_relabels(spec["selector"]),
            *_target_relabels(endpoint["port"]),
            *_converted(endpoint.get("relabelings", []), f"endpoints[{i}].relabelings"),
        ]
        jobs.append(
            {
                "job_name": f"serviceMonitor/{meta['namespace']}/{meta['name']}/{i}",
                "honor_labels": bool(endpoint.get("honorLabels", False)),
                "file_sd_configs": [{"files": [str(targets_file)], "refresh_interval": "5s"}],
                "scrape_interval": interval,
                "scrape_timeout": interval if seconds(interval) < 10 else "10s",
                "metrics_path": endpoint.get("path", "/metrics"),
                "scheme": endpoint.get("scheme", "http"),
                "tls_config": _tls(endpoint),
                "relabel_configs": relabels,
                "metric_relabel_configs": _converted(
                    endpoint.get("metricRelabelings", []), f"endpoints[{i}].metricRelabelings"
                ),
            }
        )
    return jobs


def rule_file(rule: Mapping[str, Any], *, for_cap: str | None) -> dict[str, Any]:
    """The PrometheusRule's groups as a Prometheus rule file; alerts' ``for`` capped."""
    groups = []
    for group in rule["spec"]["groups"]:
        rules = []
        for original in group["rules"]:
            r = dict(original)
            if for_cap and "for" in r and seconds(r["for"]) > seconds(for_cap):
                r["for"] = for_cap
            rules.append(r)
        groups.append({**group, "rules": rules})
    return {"groups": groups}


def prometheus_config(
    *, targets_file: Path, rules_path: Path, options: PrometheusOptions
) -> dict[str, Any]:
    """The whole prometheus.yml for the manifests' ServiceMonitor and PrometheusRule."""
    monitor = load_manifest("servicemonitor.yaml")
    return {
        "global": {
            "scrape_interval": options.scrape_interval or "30s",
            "evaluation_interval": options.evaluation_interval,
        },
        "rule_files": [str(rules_path)],
        "scrape_configs": scrape_configs(monitor, targets_file=targets_file, options=options),
    }
