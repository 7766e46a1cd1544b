"""A running VM's interface link state goes live (controller/vm/linkstate.py)."""

from __future__ import annotations

from typing import Any

from controller.vm.liveupdate import live_ops, restart_fields
from shared.clusterconfig import RolloutStrategy
from shared.model import VirtualMachine, VirtualMachineInstance

LIVE, STAGE = RolloutStrategy.LIVE_UPDATE, RolloutStrategy.STAGE


def _domain(*states: str | None, names: tuple[str, ...] = ("a", "b")) -> dict[str, Any]:
    ifaces = [
        {"name": n, "bridge": {}} | ({"state": s} if s else {})
        for n, s in zip(names, states, strict=True)
    ]
    return {"devices": {"interfaces": ifaces}}


def _vm(d: dict[str, Any]) -> VirtualMachine:
    return VirtualMachine.from_dict(
        {"metadata": {"name": "v", "uid": "vm"}, "spec": {"template": {"spec": {"domain": d}}}}
    )


def _vmi(d: dict[str, Any]) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict(
        {"metadata": {"name": "v"}, "spec": {"domain": d}, "status": {"phase": "Running"}}
    )


def test_a_changed_state_is_patched_onto_the_vmi_without_restart() -> None:
    """Template b: down while the VMI's b is up (unset): one add op on the VMI's b, no
    RestartRequired; with Stage it waits for a restart."""
    vm, vmi = _vm(_domain(None, "down")), _vmi(_domain(None, None))
    ops = [{"op": "add", "path": "/spec/domain/devices/interfaces/1/state", "value": "down"}]
    assert live_ops(vm, vmi, LIVE) == ops
    assert restart_fields(vm, vmi, LIVE) == []
    assert live_ops(vm, vmi, STAGE) == []
    assert restart_fields(vm, vmi, STAGE) == ["spec.domain.devices.interfaces[1].state"]


def test_back_up_and_unchanged() -> None:
    """Template up (or unset) while the VMI is down: patched up; equal states: nothing."""
    vmi = _vmi(_domain("down", None))
    assert live_ops(_vm(_domain("up", None)), vmi, LIVE) == [
        {"op": "add", "path": "/spec/domain/devices/interfaces/0/state", "value": "up"}
    ]
    assert live_ops(_vm(_domain(None, None)), vmi, LIVE)[0]["value"] == "up"
    assert live_ops(_vm(_domain("down", None)), vmi, LIVE) == []


def test_other_interfaces_need_a_restart() -> None:
    """Interfaces renamed in the template: no live link change (a restart brings it)."""
    vm = _vm(_domain("down", None, names=("a", "c")))
    vmi = _vmi(_domain(None, None))
    assert live_ops(vm, vmi, LIVE) == []
    assert "spec.domain.devices.interfaces[0].state" in restart_fields(vm, vmi, LIVE)
