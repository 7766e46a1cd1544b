"""Features behind an off KubeVirt feature gate are refused at admission, naming the
field; the KubeVirt CR itself is validated naming its fields."""

from __future__ import annotations

from typing import Any

from shared.clusterconfig import ClusterConfig
from tests.unit.virt_api.admission.test_defaults import demo_vmi
from virt_api.admission.gates import HOOK_SIDECARS_ANNOTATION, gate_errors
from virt_api.admission.validate import validate

HOOKS = '[{"image": "registry.local/hook:v1"}]'


def with_hooks(obj: dict[str, Any]) -> dict[str, Any]:
    obj.setdefault("metadata", {}).setdefault("annotations", {})[HOOK_SIDECARS_ANNOTATION] = HOOKS
    return obj


def test_a_sidecar_hook_needs_the_sidecar_gate() -> None:
    """Gate off: KubeVirt's refusal naming the annotation."""
    (error,) = gate_errors("VirtualMachineInstance", with_hooks(demo_vmi()), ClusterConfig())
    assert error.path == f"metadata.annotations.{HOOK_SIDECARS_ANNOTATION}"
    assert "Sidecar feature gate is not enabled" in error.message


def test_with_the_gate_on_the_hook_is_refused_as_unsupported() -> None:
    """Gate on: refused as unsupported (kubevirt-py runs no sidecars), never ignored."""
    config = ClusterConfig(feature_gates=frozenset({"Sidecar"}))
    (error,) = gate_errors("VirtualMachineInstance", with_hooks(demo_vmi()), config)
    assert "not supported" in error.message


def test_a_vm_template_annotation_is_checked_too() -> None:
    """A VM's template annotations reach its VMIs: the same refusal, at the template's path."""
    vm = {"spec": {"template": with_hooks({"spec": {}})}}
    (error,) = gate_errors("VirtualMachine", vm, ClusterConfig())
    assert error.path.startswith("spec.template.metadata.annotations.")
    assert gate_errors("VirtualMachine", {"spec": {"template": {}}}, ClusterConfig()) == []


def test_the_kubevirt_cr_is_validated_naming_the_field() -> None:
    """A bad value in the KubeVirt CR is refused with its path; a good one passes."""
    bad = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "KubeVirt",
        "metadata": {"name": "kubevirt"},
        "spec": {"configuration": {"migrations": {"bandwidthPerMigration": "fast"}}},
    }
    errors = validate("KubeVirt", bad)
    assert [e.path for e in errors] == ["spec.configuration.migrations.bandwidthPerMigration"]
    good = {**bad, "spec": {"configuration": {"migrations": {"bandwidthPerMigration": "1Gi"}}}}
    assert validate("KubeVirt", good) == []
