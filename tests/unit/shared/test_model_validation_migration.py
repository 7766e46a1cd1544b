"""A VMIM's spec.addedNodeSelector: typed, round-tripped, and each bad label key or value
refused at admission naming the key (shared.model._validate_labels)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import VirtualMachineInstanceMigration
from shared.model.unsupported import unsupported_fields
from shared.model.validation import validate_migration
from virt_api.admission.validate import validate

KIND = VirtualMachineInstanceMigration.KIND


def _vmim(selector: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": KIND,
        "metadata": {"name": "m", "namespace": "default"},
        "spec": {"vmiName": "vm", "addedNodeSelector": selector},
    }


def test_added_node_selector_is_typed_and_admitted() -> None:
    """A well-formed selector parses into the spec, round-trips, and is neither refused
    nor reported unsupported."""
    selector = {"kubernetes.io/hostname": "node-2", "example.com/zone": "", "disk_type": "ssd"}
    vmim = VirtualMachineInstanceMigration.from_dict(_vmim(selector))
    assert vmim.spec.added_node_selector == selector
    assert vmim.to_dict()["spec"]["addedNodeSelector"] == selector
    assert validate_migration(vmim) == []
    assert unsupported_fields(vmim) == []
    assert validate(KIND, _vmim(selector)) == []


@pytest.mark.parametrize(
    ("selector", "path", "fragment"),
    [
        pytest.param({"bad key": "x"}, "spec.addedNodeSelector[bad key]", "invalid label key", id="space"),
        pytest.param({"/x": "y"}, "spec.addedNodeSelector[/x]", "prefix before '/'", id="empty-prefix"),
        pytest.param({"Bad_Prefix/x": "y"}, "spec.addedNodeSelector[Bad_Prefix/x]", "DNS-1123", id="bad-prefix"),
        pytest.param({"a/b/c": "y"}, "spec.addedNodeSelector[a/b/c]", "DNS-1123", id="two-slashes"),
        pytest.param({"x" * 64: "y"}, f"spec.addedNodeSelector[{'x' * 64}]", "invalid label key", id="long-name"),
        pytest.param({"k": "-v"}, "spec.addedNodeSelector[k]", "invalid label value", id="bad-value"),
        pytest.param({"k": "v" * 64}, "spec.addedNodeSelector[k]", "invalid label value", id="long-value"),
        pytest.param({"k": 3}, "spec.addedNodeSelector[k]", "expected str", id="not-a-string"),
        pytest.param(["k"], "spec.addedNodeSelector", "expected object", id="not-a-map"),
    ],
)  # fmt: skip
def test_bad_added_node_selector_is_refused(selector: Any, path: str, fragment: str) -> None:
    """Admission refuses a bad label key or value, or a non-map, naming the field and key."""
    errors = validate(KIND, _vmim(selector))
    assert any(e.path == path and fragment in e.message for e in errors), [str(e) for e in errors]
