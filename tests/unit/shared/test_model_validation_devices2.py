"""Admission of useVirtioTransitional, disableHotplug and autoattachVSOCK: honoured (not refused), a value
of the wrong type is a parse error naming the field, and disableHotplug refuses a
hotpluggable volume naming it."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model.errors import ParseError
from shared.model.unsupported import UNKNOWN_FIELD
from tests.unit.shared._validation_support import VOLS, messages_at, vmi_errors
from tests.unit.shared.test_model_unsupported import _vmi as unsupported_vmi

DEVICES = "spec.domain.devices"


@pytest.mark.parametrize("key", ["useVirtioTransitional", "disableHotplug", "autoattachVSOCK"])
@pytest.mark.parametrize("value", ["yes", 1, {"x": 1}], ids=["string", "int", "object"])
def test_a_non_boolean_is_refused_naming_the_field(key: str, value: Any) -> None:
    """Each is a boolean: anything else stops at parsing, naming the field."""
    with pytest.raises(ParseError, match=rf"{DEVICES}\.{key}: expected bool"):
        vmi_errors({f"{DEVICES}.{key}": value})


@pytest.mark.parametrize(
    "source",
    [
        pytest.param({"persistentVolumeClaim": {"claimName": "c", "hotpluggable": True}}, id="pvc"),
        pytest.param({"dataVolume": {"name": "dv", "hotpluggable": True}}, id="data-volume"),
    ],
)
def test_disable_hotplug_refuses_a_hotpluggable_volume(source: dict[str, Any]) -> None:
    """disableHotplug: true and a hotpluggable volume: refused at its hotpluggable field."""
    key = next(iter(source))
    errors = vmi_errors({
        f"{DEVICES}.disableHotplug": True,
        f"{VOLS}[3]": {"name": "data", **source},
    })  # fmt: skip
    found = messages_at(errors, f"{VOLS}[3].{key}.hotpluggable")
    assert found == ["hotplug is disabled by spec.domain.devices.disableHotplug"]


@pytest.mark.parametrize("value", [True, "yes", []], ids=["bool", "string", "list"])
def test_downward_metrics_must_be_an_object(value: Any) -> None:
    """devices.downwardMetrics is `{}`: anything else stops at parsing, naming it."""
    with pytest.raises(ParseError, match=rf"{DEVICES}\.downwardMetrics"):
        vmi_errors({f"{DEVICES}.downwardMetrics": value})


def test_downward_metrics_takes_no_fields() -> None:
    """A key inside downwardMetrics is unknown to KubeVirt: refused naming it."""
    found = unsupported_vmi({f"{DEVICES}.downwardMetrics": {"period": 5}})
    assert found == [(f"{DEVICES}.downwardMetrics.period", UNKNOWN_FIELD)]


def test_one_downward_metrics_volume_at_most() -> None:
    """A second downwardMetrics volume is refused naming it (KubeVirt's rule)."""
    errors = vmi_errors({
        f"{VOLS}[2]": {"name": "scratch", "downwardMetrics": {}},
        f"{VOLS}[3]": {"name": "data", "downwardMetrics": {}},
    })  # fmt: skip
    found = messages_at(errors, f"{VOLS}[3].downwardMetrics")
    assert found == [f"only one downwardMetrics volume is allowed (also {VOLS}[2])"]
    assert messages_at(errors, f"{VOLS}[2].downwardMetrics") == []


def test_a_downward_metrics_volume_takes_no_fields() -> None:
    """A key inside volumes[].downwardMetrics is unknown: refused naming it."""
    found = unsupported_vmi({f"{VOLS}[0]": {"name": "x", "downwardMetrics": {"size": 1}}})
    assert (f"{VOLS}[0].downwardMetrics.size", UNKNOWN_FIELD) in found


def test_both_fields_set_true_are_valid() -> None:
    """useVirtioTransitional and disableHotplug true, no hotpluggable volume: no error."""
    changes = {f"{DEVICES}.useVirtioTransitional": True, f"{DEVICES}.disableHotplug": True}
    assert vmi_errors(changes) == []
