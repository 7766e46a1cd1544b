"""Admission of a VirtualMachinePool's scaleInStrategy statePreservation
(shared/model/_validate_pool.py): Disabled anywhere and Offline on proactive scale-in are
admitted, and Offline on opportunistic scale-in too; Online is admitted (kept claims, as
Offline: KubeVirt 1.8's controller does the same); unknown values are refused naming the
field."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.virt_api.admission.test_validate_replicaset import admissible_pool
from virt_api.admission.validate import validate

KIND = "VirtualMachinePool"


def _errors(strategy: dict[str, Any]) -> list[Any]:
    return validate(KIND, admissible_pool(scaleInStrategy=strategy))


@pytest.mark.parametrize(
    "strategy",
    [
        {"proactive": {"statePreservation": "Offline"}},
        {"proactive": {"statePreservation": "Disabled",
                       "selectionPolicy": {"sortPolicy": "DescendingOrder"}}},
        {"opportunistic": {"statePreservation": "Disabled"}},
        {"opportunistic": {}},
        {"opportunistic": {"statePreservation": "Offline"}},
        {"proactive": {"statePreservation": "Online"}},
        {"opportunistic": {"statePreservation": "Online"}},
    ],
    ids=["proactive-offline", "proactive-disabled", "opportunistic-disabled", "opportunistic",
         "opportunistic-offline", "proactive-online", "opportunistic-online"],
)  # fmt: skip
def test_every_known_value_is_admitted(strategy: dict[str, Any]) -> None:
    """Disabled (KubeVirt's default), Offline and Online (kept claims, as Offline, as in
    KubeVirt 1.8), proactive or opportunistic: nothing refused."""
    assert [e.path for e in _errors(strategy)] == []


BAD = [
    pytest.param({"proactive": {"statePreservation": "Sometimes"}},
                 "spec.scaleInStrategy.proactive.statePreservation", "Offline",
                 id="unknown-value"),
    pytest.param({"proactive": {"statePreservation": 1}},
                 "spec.scaleInStrategy.proactive.statePreservation", "string",
                 id="not-a-string"),
]  # fmt: skip


@pytest.mark.parametrize(("strategy", "path", "why"), BAD)
def test_bad_state_preservation_is_refused_naming_it(
    strategy: dict[str, Any], path: str, why: str
) -> None:
    """Each bad statePreservation is refused at its path, saying why."""
    errors = _errors(strategy)
    assert [e.path for e in errors] == [path], errors
    assert why in errors[0].message, errors[0].message


def test_state_preservation_is_not_a_field_of_updates() -> None:
    """updateStrategy.proactive has no statePreservation in KubeVirt: refused there."""
    raw = admissible_pool(updateStrategy={"proactive": {"statePreservation": "Offline"}})
    assert [e.path for e in validate(KIND, raw)] == [
        "spec.updateStrategy.proactive.statePreservation"
    ]
