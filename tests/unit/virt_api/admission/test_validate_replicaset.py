"""Admission of VirtualMachineInstanceReplicaSets: the template is checked as a VMI (paths
rooted at spec.template.spec), the selector must select the template, replicas ≥ 0."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.controller.replicaset.fleet import rs_dict
from virt_api.admission.validate import validate

KIND = "VirtualMachineInstanceReplicaSet"


def paths(obj: dict[str, Any]) -> list[str]:
    return [e.path for e in validate(KIND, obj)]


def test_a_valid_replica_set_is_admitted() -> None:
    """The fleet builder's set has nothing to refuse."""
    assert paths(rs_dict()) == []


def edit(change: str) -> dict[str, Any]:
    raw = rs_dict()
    spec = raw["spec"]
    match change:
        case "negative":
            spec["replicas"] = -1
        case "mismatch":
            spec["selector"] = {"matchLabels": {"app": "db"}}
        case "no-selector":
            del spec["selector"]
        case "bad-expression":
            spec["selector"]["matchExpressions"] = [{"key": "app", "operator": "In"}]
        case "no-memory":
            del spec["template"]["spec"]["domain"]["memory"]
        case "unknown-field":
            spec["template"]["spec"]["domain"]["bogus"] = 1
    return raw


@pytest.mark.parametrize(
    ("change", "path"),
    [
        pytest.param("negative", "spec.replicas", id="negative-replicas"),
        pytest.param("mismatch", "spec.selector", id="selector-misses-template"),
        pytest.param("no-selector", "spec.selector", id="selector-required"),
        pytest.param(
            "bad-expression", "spec.selector.matchExpressions[0].values", id="in-without-values"
        ),
        pytest.param("no-memory", "spec.template.spec.domain", id="template-checked-as-vmi"),
        pytest.param("unknown-field", "spec.template.spec.domain.bogus", id="unknown-field"),
    ],
)
def test_refusals_name_the_field(change: str, path: str) -> None:
    """Each bad set is refused with an error at the named path (or below it)."""
    got = paths(edit(change))
    assert any(p.startswith(path) for p in got), got
