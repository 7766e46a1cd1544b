"""Admission of VirtualMachineInstanceReplicaSets: the template is checked as a VMI (paths
rooted at spec.template.spec), the selector must select the template, replicas ≥ 0."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.controller.pool.test_logic import pool_dict
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


def admissible_pool(**spec: Any) -> dict[str, Any]:
    """The pool builder's pool without its DataVolume (the builder's template has no
    source), its secret and configMap disks attached."""
    raw = pool_dict(**spec)
    vm = raw["spec"]["virtualMachineTemplate"]["spec"]
    del vm["dataVolumeTemplates"]
    vmi = vm["template"]["spec"]
    vmi["volumes"] = [v for v in vmi["volumes"] if "dataVolume" not in v]
    vmi["domain"]["devices"] = {"disks": [{"name": v["name"]} for v in vmi["volumes"]]}
    return raw


def test_a_pool_template_is_checked_as_a_vm() -> None:
    """A pool whose template's VMI lacks memory is refused under
    spec.virtualMachineTemplate.spec.template.spec; unsupported strategy fields too."""
    assert [e.path for e in validate("VirtualMachinePool", admissible_pool())] == []
    raw = admissible_pool(updateStrategy={"proactive": {"statePreservation": "Offline"}})
    del raw["spec"]["virtualMachineTemplate"]["spec"]["template"]["spec"]["domain"]["memory"]
    got = [e.path for e in validate("VirtualMachinePool", raw)]
    assert any(p.startswith("spec.virtualMachineTemplate.spec.template.spec.domain") for p in got)
    assert "spec.updateStrategy.proactive.statePreservation" in got


def test_a_pool_with_per_vm_datavolumes_is_admitted() -> None:
    """A pool whose VM template has a blank dataVolumeTemplate and a disk on it (each VM
    its own claim) is admitted; the template's DataVolume without a source is refused
    under spec.virtualMachineTemplate.spec.dataVolumeTemplates."""
    raw = admissible_pool()
    vm = raw["spec"]["virtualMachineTemplate"]["spec"]
    storage = {"resources": {"requests": {"storage": "16Mi"}}}
    vm["dataVolumeTemplates"] = [
        {"metadata": {"name": "scratch"}, "spec": {"source": {"blank": {}}, "storage": storage}}
    ]
    vmi = vm["template"]["spec"]
    vmi["volumes"].append({"name": "scratch", "dataVolume": {"name": "scratch"}})
    vmi["domain"]["devices"]["disks"].append({"name": "scratch"})
    assert [e.path for e in validate("VirtualMachinePool", raw)] == []
    del vm["dataVolumeTemplates"][0]["spec"]["source"]
    got = [e.path for e in validate("VirtualMachinePool", raw)]
    assert any(
        p.startswith("spec.virtualMachineTemplate.spec.dataVolumeTemplates[0]") for p in got
    ), got
