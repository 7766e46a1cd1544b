"""Validation rules admission relies on: machine types without markup, bounded disks."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.shared._validation_support import messages_at, vmi_errors

RULES = [
    pytest.param(
        {"spec.domain.machine.type": "q35'/><evil/>"},
        "spec.domain.machine.type",
        "QEMU machine type",
        id="machine-markup",
    ),
    pytest.param(
        {"spec.domain.machine.type": "pc q35"},
        "spec.domain.machine.type",
        "QEMU machine type",
        id="machine-space",
    ),
    pytest.param(
        {"spec.volumes[2].emptyDisk.capacity": "1Ei"},
        "spec.volumes[2].emptyDisk.capacity",
        "at most 64Ti",
        id="empty-disk-1Ei",
    ),
    pytest.param(
        {"spec.volumes[3].hostDisk.capacity": "100Ti"},
        "spec.volumes[3].hostDisk.capacity",
        "at most 64Ti",
        id="host-disk-100Ti",
    ),
]


@pytest.mark.parametrize(("changes", "path", "fragment"), RULES)
def test_rule(changes: dict[str, Any], path: str, fragment: str) -> None:
    """Each bad value is reported at its own path."""
    assert any(fragment in m for m in messages_at(vmi_errors(changes), path))


@pytest.mark.parametrize("machine", ["pc", "q35", "pc-q35-9.2", "pc-i440fx-rhel7.6.0", ""])
def test_machine_types_pass(machine: str) -> None:
    """QEMU's own machine type names are valid; "" means the default (KubeVirt's examples)."""
    assert (
        messages_at(vmi_errors({"spec.domain.machine.type": machine}), "spec.domain.machine.type")
        == []
    )
