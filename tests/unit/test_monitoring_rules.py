"""The monitoring manifests: the ServiceMonitor keeps the daemons' own labels
(honorLabels); the PrometheusRule passes Prometheus' own `promtool check rules` and its rule
unit tests (`promtool test rules` on tests/unit/monitoring/prom-rules-tests.yaml, which
covers every recording rule and makes every alert fire); alerts carry severity, summary and
a runbook section in docs/monitoring.md; every expression names only metrics a daemon
exports, `up`, or a series recorded in the same file."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "manifests" / "base" / "monitoring"
RULE_TESTS = Path(__file__).resolve().parent / "monitoring" / "prom-rules-tests.yaml"
RUNBOOKS = REPO / "docs" / "monitoring.md"
TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<dur>\[\d+[smhdwy]\])|(?P<num>\d+(?:\.\d+)?)'
    r"|(?P<id>[A-Za-z_:][A-Za-z0-9_:]*)|(?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=(){},]))"
)
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
            "unless", "bool", "offset"}  # fmt: skip
FUNCTIONS = {"sum", "avg", "min", "max", "count", "rate", "irate", "increase", "vector",
             "absent", "topk", "bottomk", "group", "delta", "time", "clamp_min", "clamp_max",
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
    """Each rule records or alerts; alerts have `for`, a severity, a summary and a runbook:
    a `runbook_url` naming a section of docs/monitoring.md that has text."""
    headings = re.findall(r"^### (\w+)\n\n\S", RUNBOOKS.read_text(), flags=re.MULTILINE)
    for rule in rules():
        assert ("record" in rule) != ("alert" in rule), rule
        if "alert" in rule:
            assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule
            assert rule["annotations"]["summary"] and rule["for"], rule
            url = rule["annotations"]["runbook_url"]
            assert url == f"docs/monitoring.md#{rule['alert'].lower()}", url
            assert rule["alert"] in headings, f"no runbook section for {rule['alert']}"


def _promtool(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """promtool (Debian's prometheus package, in scripts/lib/common.sh's apt list) on the
    PrometheusRule's groups written out as a rule file, in `tmp_path`."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: install Debian's prometheus package (kv_ensure_apt)"
    doc = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": doc["spec"]["groups"]}))
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    return subprocess.run(
        [promtool, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )


def test_promtool_checks_the_rules(tmp_path: Path) -> None:
    """`promtool check rules` accepts every group: PromQL, durations, templates."""
    done = _promtool(tmp_path, "check", "rules", "rules.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules())} rules found" in done.stdout, done.stdout


def test_promtool_rule_unit_tests_pass(tmp_path: Path) -> None:
    """`promtool test rules`: each case's input series give the expected recorded series
    and fire exactly the expected alerts, labels and expanded annotations included."""
    done = _promtool(tmp_path, "test", "rules", RULE_TESTS.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout, done.stdout


def test_promtool_unit_tests_can_fail(tmp_path: Path) -> None:
    """The rule tests are live: an alert case expecting nothing where the rules fire fails."""
    cases = yaml.safe_load(RULE_TESTS.read_text())
    for case in cases["tests"]:
        for alert in case.get("alert_rule_test", []):
            alert["exp_alerts"] = []
    (tmp_path / "broken.yaml").write_text(yaml.safe_dump(cases))
    done = _promtool(tmp_path, "test", "rules", "broken.yaml")
    assert done.returncode != 0 and "FAILED" in done.stdout + done.stderr, done.stdout


def test_every_rule_has_a_unit_test() -> None:
    """Every recording rule is evaluated by a promql_expr_test, and every alert has a case
    in which it fires (a non-empty exp_alerts)."""
    cases = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    exprs = " ".join(t["expr"] for c in cases for t in c.get("promql_expr_test", []))
    fired = {a["alertname"] for c in cases for a in c.get("alert_rule_test", []) if a["exp_alerts"]}
    for rule in rules():
        if "record" in rule:
            assert re.search(rf"(?<![\w:]){re.escape(rule['record'])}(?![\w:])", exprs), rule
        else:
            assert rule["alert"] in fired, f"no case fires {rule['alert']}"


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
