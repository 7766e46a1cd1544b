"""Admission of a VirtualMachinePool's KubeVirt 1.8 policies (shared/model/_validate_pool.py):
maxUnavailable, selectionPolicy selectors and autohealing.minFailingToStartDuration are
admitted when well formed, and each bad value is refused naming its field."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.virt_api.admission.test_validate_replicaset import admissible_pool
from virt_api.admission.validate import validate

KIND = "VirtualMachinePool"
SEL = "spec.scaleInStrategy.proactive.selectionPolicy.selectors"
UPD = "spec.updateStrategy.proactive.selectionPolicy.selectors"


def _selectors(**selectors: Any) -> dict[str, Any]:
    return {"proactive": {"selectionPolicy": {"sortPolicy": "Oldest", "selectors": selectors}}}


GOOD = {
    "maxUnavailable": "25%",
    "scaleInStrategy": _selectors(
        labelSelector={"matchLabels": {"tier": "spare"}},
        nodeSelectorRequirementMatcher=[
            {"key": "zone", "operator": "In", "values": ["a", "b"]},
            {"key": "gpu", "operator": "DoesNotExist"},
            {"key": "rank", "operator": "Gt", "values": ["2"]},
        ],
    ),
    "updateStrategy": _selectors(labelSelector={"matchExpressions": [
        {"key": "canary", "operator": "Exists"}]}),
    "autohealing": {"startUpFailureThreshold": 2, "minFailingToStartDuration": "2m30s"},
}  # fmt: skip


def test_every_policy_set_well_is_admitted() -> None:
    """maxUnavailable (a count or a percentage), selectors on scale-in and update, and
    minFailingToStartDuration: admitted, nothing refused as unsupported."""
    assert [e.path for e in validate(KIND, admissible_pool(**GOOD))] == []
    assert [e.path for e in validate(KIND, admissible_pool(maxUnavailable=3))] == []


BAD = [
    pytest.param({"maxUnavailable": -1}, "spec.maxUnavailable", id="max-unavailable-negative"),
    pytest.param({"maxUnavailable": "150%"}, "spec.maxUnavailable", id="max-unavailable-over-100"),
    pytest.param({"maxUnavailable": "half"}, "spec.maxUnavailable", id="max-unavailable-text"),
    pytest.param({"maxUnavailable": True}, "spec.maxUnavailable", id="max-unavailable-bool"),
    pytest.param({"scaleInStrategy": _selectors(labelSelector={"matchExpressions": [
                     {"key": "a", "operator": "Near"}]})},
                 f"{SEL}.labelSelector.matchExpressions[0].operator", id="label-operator"),
    pytest.param({"scaleInStrategy": _selectors(nodeSelectorRequirementMatcher=[
                     {"key": "zone", "operator": "Near", "values": ["a"]}])},
                 f"{SEL}.nodeSelectorRequirementMatcher[0].operator", id="node-operator"),
    pytest.param({"scaleInStrategy": _selectors(nodeSelectorRequirementMatcher=[
                     {"operator": "Exists"}])},
                 f"{SEL}.nodeSelectorRequirementMatcher[0].key", id="node-key-missing"),
    pytest.param({"updateStrategy": _selectors(nodeSelectorRequirementMatcher=[
                     {"key": "zone", "operator": "In"}])},
                 f"{UPD}.nodeSelectorRequirementMatcher[0].values", id="node-in-no-values"),
    pytest.param({"updateStrategy": _selectors(nodeSelectorRequirementMatcher=[
                     {"key": "rank", "operator": "Lt", "values": ["x"]}])},
                 f"{UPD}.nodeSelectorRequirementMatcher[0].values", id="node-lt-not-integer"),
    pytest.param({"scaleInStrategy": _selectors(nodeSelectorRequirementMatcher=[
                     {"key": "gpu", "operator": "Exists", "values": ["1"]}])},
                 f"{SEL}.nodeSelectorRequirementMatcher[0].values", id="node-exists-values"),
    pytest.param({"scaleInStrategy": _selectors(podSelector={})}, f"{SEL}.podSelector",
                 id="selectors-unknown-key"),
    pytest.param({"autohealing": {"minFailingToStartDuration": "soon"}},
                 "spec.autohealing.minFailingToStartDuration", id="duration-not-go"),
    pytest.param({"autohealing": {"minFailingToStartDuration": "0s"}},
                 "spec.autohealing.minFailingToStartDuration", id="duration-zero"),
    pytest.param({"autohealing": {"minFailingToStartDuration": 300}},
                 "spec.autohealing.minFailingToStartDuration", id="duration-number"),
]  # fmt: skip


@pytest.mark.parametrize(("spec", "path"), BAD)
def test_bad_policy_values_are_refused_naming_the_field(spec: dict[str, Any], path: str) -> None:
    """Each bad value of a newly honoured pool field is refused at its own path."""
    try:
        got = [e.path for e in validate(KIND, admissible_pool(**spec))]
    except Exception as exc:  # a wrongly typed value fails parsing, naming the field
        assert path in str(exc), exc
        return
    assert path in got, got
