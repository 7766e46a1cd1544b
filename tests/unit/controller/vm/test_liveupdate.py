"""A running VM's template edits: affinity, tolerations and the node selector go to the VMI
live (LiveUpdate); every other change sets RestartRequired naming the fields; defaults
only the VMI carries are no change."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from controller.vm.liveupdate import changed_paths, live_ops, restart_fields, with_restart_required
from shared.clusterconfig import RolloutStrategy
from shared.model import VirtualMachine, VirtualMachineInstance

NOW = datetime(2026, 11, 27, tzinfo=UTC)
LIVE, STAGE = RolloutStrategy.LIVE_UPDATE, RolloutStrategy.STAGE


def spec(sockets: int = 1, **more: Any) -> dict[str, Any]:
    return {"domain": {"cpu": {"sockets": sockets}, "devices": {}}, **more}


def vm(template: dict[str, Any]) -> VirtualMachine:
    return VirtualMachine.from_dict(
        {"metadata": {"name": "a", "uid": "vm-uid"}, "spec": {"template": {"spec": template}}}
    )


def vmi(running: dict[str, Any]) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict(
        {"metadata": {"name": "a"}, "spec": running, "status": {"phase": "Running"}}
    )


def test_defaults_only_the_vmi_has_are_no_change() -> None:
    """Keys admission added to the VMI are not template changes."""
    running = spec(machine={"type": "q35"})
    running["domain"]["cpu"]["cores"] = 1
    assert restart_fields(vm(spec()), vmi(running), LIVE) == []


def test_a_changed_field_is_named() -> None:
    """sockets 1 → 2 on a VMI without maxSockets: RestartRequired names spec.domain.cpu.sockets."""
    status = with_restart_required(
        vm(spec(2)).status, vm(spec(2)), vmi(spec(1)), strategy=LIVE, now=NOW
    )
    (condition,) = status.conditions
    assert condition.type == "RestartRequired" and condition.status == "True"
    assert "spec.domain.cpu.sockets" in (condition.message or "")


def test_affinity_and_tolerations_go_live_with_live_update_only() -> None:
    """LiveUpdate: patch ops for the VMI, no restart; Stage: a restart, no ops."""
    tolerations = [{"key": "k", "operator": "Exists"}]
    template = spec(tolerations=tolerations, nodeSelector={"zone": "a"})
    assert live_ops(vm(template), vmi(spec()), LIVE) == [
        {"op": "add", "path": "/spec/tolerations", "value": tolerations},
        {"op": "add", "path": "/spec/nodeSelector", "value": {"zone": "a"}},
    ]
    assert restart_fields(vm(template), vmi(spec()), LIVE) == []
    assert live_ops(vm(template), vmi(spec()), STAGE) == []
    assert sorted(restart_fields(vm(template), vmi(spec()), STAGE)) == [
        "spec.nodeSelector",
        "spec.tolerations",
    ]


def test_no_running_vmi_no_condition() -> None:
    """Without a running VMI the condition is dropped."""
    status = with_restart_required(vm(spec(2)).status, vm(spec(2)), None, strategy=LIVE, now=NOW)
    assert status.conditions == ()


def test_lists_compare_by_position_and_length() -> None:
    """A list of another length, or an element changed, is a change at the list's path."""
    assert changed_paths({"a": [1, 2]}, {"a": [1]}, "spec") == ["spec.a"]
    assert changed_paths({"a": [{"b": 1}]}, {"a": [{"b": 2, "c": 3}]}, "spec") == ["spec.a[0].b"]
