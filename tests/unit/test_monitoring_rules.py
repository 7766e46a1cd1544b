"""The monitoring manifests: the ServiceMonitor keeps the daemons' own labels
(honorLabels), and the PrometheusRule is well formed: every rule records or alerts, alerts
carry severity and summary, every expression passes a PromQL syntax check (balanced
brackets, label matchers, range durations) and names only metrics a daemon exports, `up`,
or a series recorded in the same file (`promtool` is not available here)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "manifests" / "base" / "monitoring"
TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<dur>\[\d+[smhdwy]\])|(?P<num>\d+(?:\.\d+)?)'
    r"|(?P<id>[A-Za-z_:][A-Za-z0-9_:]*)|(?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=(){},]))"
)
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
            "unless", "bool", "offset"}  # fmt: skip
FUNCTIONS = {"sum", "avg", "min", "max", "count", "rate", "irate", "increase", "vector",
             "absent", "topk", "bottomk", "delta", "time", "clamp_min", "clamp_max",
             "max_over_time", "min_over_time", "avg_over_time", "count_over_time"}  # fmt: skip
MATCH_OPS = {"=", "!=", "=~", "!~"}


def tokens(expr: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(expr.rstrip()):
        m = TOKEN.match(expr, pos)
        assert m and m.end() > pos, f"cannot parse at {expr[pos : pos + 30]!r} in {expr!r}"
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def metric_names(expr: str) -> set[str]:
    """Check the syntax of `expr` and return the metric names it selects."""
    toks, names, stack, i = tokens(expr), set(), [], 0
    pairs = {")": "(", "}": "{"}
    while i < len(toks):
        kind, text = toks[i]
        if text == "{":
            i = _matchers(toks, i + 1, expr)
            continue
        if text in ("(",):
            stack.append(text)
        elif text in pairs:
            assert stack and stack.pop() == pairs[text], f"unbalanced {text!r} in {expr!r}"
        elif kind == "id" and text in ("by", "without", "on", "ignoring"):
            assert toks[i + 1][1] == "(", f"{text} needs a label list in {expr!r}"
            i = _labels(toks, i + 2, expr)
            continue
        elif kind == "id" and text not in KEYWORDS:
            after = toks[i + 1][1] if i + 1 < len(toks) else ""
            calls = after == "(" or (text in FUNCTIONS and after in ("by", "without"))
            assert not calls or text in FUNCTIONS, f"unknown function {text!r} in {expr!r}"
            if not calls:
                names.add(text)
        elif kind == "dur":
            assert toks[i - 1][1] in ("}",) or toks[i - 1][0] == "id", f"stray range in {expr!r}"
        i += 1
    assert not stack, f"unclosed brackets in {expr!r}"
    return names


def _matchers(toks: list[tuple[str, str]], i: int, expr: str) -> int:
    """Label matchers `name op "value"`, comma separated, up to `}`; returns past it."""
    while toks[i][1] != "}":
        (k1, _), (_, op), (k3, _) = toks[i : i + 3]
        assert k1 == "id" and op in MATCH_OPS and k3 == "str", f"bad matcher in {expr!r}"
        i += 3
        if toks[i][1] == ",":
            i += 1
    return i + 1


def _labels(toks: list[tuple[str, str]], i: int, expr: str) -> int:
    while toks[i][1] != ")":
        assert toks[i][0] == "id", f"bad label list in {expr!r}"
        i += 2 if toks[i + 1][1] == "," else 1
    return i + 1


def exported_metrics() -> set[str]:
    """Every metric name a daemon registers (string literals in the daemons' sources)."""
    found: set[str] = set()
    for package in ("controller", "handler", "shared"):
        for source in (REPO / package).rglob("*.py"):
            found |= set(re.findall(r'"(kubevirt_[a-z_]+)"', source.read_text()))
    return found


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    assert doc["kind"] == "PrometheusRule" and doc["apiVersion"] == "monitoring.coreos.com/v1"
    return [r for g in doc["spec"]["groups"] for r in g["rules"]]


def test_service_monitor_honors_labels_and_scrapes_https() -> None:
    """Every endpoint keeps the daemons' namespace/name labels instead of the target's, and
    scrapes HTTPS as the daemons serve it (their own certificates, as KubeVirt's)."""
    doc = yaml.safe_load((MONITORING / "servicemonitor.yaml").read_text())
    assert all(e.get("honorLabels") is True for e in doc["spec"]["endpoints"])
    assert all(e.get("scheme") == "https" and "tlsConfig" in e for e in doc["spec"]["endpoints"])


def test_rule_is_kustomized() -> None:
    """The PrometheusRule ships with the monitoring kustomization."""
    kust = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    assert "prometheusrule.yaml" in kust["resources"]


def test_rules_are_well_formed() -> None:
    """Each rule records or alerts; alerts have `for`, a severity and a summary."""
    for rule in rules():
        assert ("record" in rule) != ("alert" in rule), rule
        if "alert" in rule:
            assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule
            assert rule["annotations"]["summary"] and rule["for"], rule


def test_expressions_name_only_served_metrics() -> None:
    """Every expression parses and selects `up`, an exported metric or a recorded series."""
    recorded = {r["record"] for r in rules() if "record" in r}
    known = exported_metrics() | recorded | {"up"}
    for rule in rules():
        unknown = metric_names(rule["expr"]) - known
        assert not unknown, f"{rule.get('alert') or rule.get('record')}: {sorted(unknown)}"


@pytest.mark.parametrize(
    "expr",
    [
        pytest.param("sum(rate(x[5m]", id="unclosed"),
        pytest.param("up{pod=virt}", id="unquoted-value"),
        pytest.param("frobnicate(up)", id="unknown-function"),
        pytest.param("sum by up", id="by-without-list"),
    ],
)
def test_checker_rejects_bad_syntax(expr: str) -> None:
    """The syntax check can fail: malformed expressions are refused."""
    with pytest.raises(AssertionError):
        metric_names(expr)


def test_checker_finds_metric_names() -> None:
    """Label names, functions and keywords are not mistaken for metrics."""
    expr = 'sum by (namespace) (rate(a_total{code=~"5.."}[5m])) / on(pod) b or vector(0)'
    assert metric_names(expr) == {"a_total", "b"}


def test_rules_cover_kubevirts_vm_and_migration_alerts() -> None:
    """VMs in an error state (CrashLoopBackOff among them), Failed VMIs, failed and
    excessive migrations and too few ready controllers are alerted on."""
    alerts = {r["alert"] for r in rules() if "alert" in r}
    assert {
        "KubeVirtVMStuckInErrorState", "KubeVirtVMInCrashLoopBackOff", "KubeVirtVMIFailed",
        "KubeVirtVMIMigrationFailed", "KubeVirtVMIExcessiveMigrations", "LowVirtControllersCount",
    } <= alerts  # fmt: skip


def test_dashboard_legends_name_the_disk_and_interface() -> None:
    """Per-drive and per-interface panels show which disk or interface a line is, and every
    dashboard query selects only served series."""
    doc = json.loads((MONITORING / "kubevirt-py-dashboard.json").read_text())
    targets = [t for p in doc["panels"] for t in p.get("targets", [])]
    exported = exported_metrics()
    for t in targets:
        assert metric_names(t["expr"]) <= exported, t["expr"]
        if "kubevirt_vmi_network_" in t["expr"]:
            assert "{{interface}}" in t["legendFormat"], t
        if "kubevirt_vmi_storage_" in t["expr"]:
            assert "{{drive}}" in t["legendFormat"], t
