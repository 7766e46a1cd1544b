"""Validation of domain.cpu.features: a name (one a node label can hold, named once) and
one of libvirt's policies (unset: require); refusals name the field."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import VirtualMachineInstance
from shared.model.unsupported import unsupported_fields
from shared.model.validation import ValidationLimits, validate_vmi
from tests.unit.shared._validation_support import edit, load

FEATURES = "spec.domain.cpu.features"


def _errors(features: list[dict[str, Any]]) -> dict[str, str]:
    raw = edit(load("vmi-kernel-boot.yaml"), {FEATURES: features})
    vmi = VirtualMachineInstance.from_dict(raw)
    errors = validate_vmi(vmi, limits=ValidationLimits(emulation=True))
    return {e.path: e.message for e in errors}


def test_every_policy_and_none_are_accepted_and_not_refused_as_unsupported() -> None:
    """force/require/optional/disable/forbid, "" and unset pass; the field is honoured."""
    features = [
        {"name": "pcid", "policy": "force"},
        {"name": "sse4.2", "policy": "require"},
        {"name": "x2apic", "policy": "optional"},
        {"name": "vme", "policy": "disable"},
        {"name": "avx512f", "policy": "forbid"},
        {"name": "svme-addr-chk", "policy": ""},
        {"name": "aes"},
    ]
    assert _errors(features) == {}
    raw = edit(load("vmi-kernel-boot.yaml"), {FEATURES: features})
    assert unsupported_fields(VirtualMachineInstance.from_dict(raw)) == []


@pytest.mark.parametrize(
    ("features", "path", "words"),
    [
        pytest.param([{"name": "pcid", "policy": "must"}], "[0].policy", "one of", id="policy"),
        pytest.param([{"policy": "require"}], "[0].name", "must name", id="no-name"),
        pytest.param([{"name": ""}], "[0].name", "must name", id="empty-name"),
        pytest.param([{"name": "a b"}], "[0].name", "feature name", id="bad-name"),
        pytest.param([{"name": "pcid"}, {"name": "pcid"}], "[1].name", "already", id="twice"),
    ],
)
def test_bad_features_are_refused_naming_the_field(
    features: list[dict[str, Any]], path: str, words: str
) -> None:
    """Each bad value is one error at its own path."""
    errors = _errors(features)
    assert list(errors) == [FEATURES + path]
    assert words in errors[FEATURES + path]
