"""A running VM's interface link state, changed live (pure): KubeVirt 1.5+'s `state`.

An edit of a template interface's `state` (up or down; unset is up) is copied onto the
running VMI's interface of the same name; virt-handler then has the launcher set the
domain's link (handler/linkstate.py), no restart. Only a VMI whose interfaces are the
template's, by name and order, follows: anything else needs a restart.
"""

from __future__ import annotations

from typing import Any

from shared.model import VirtualMachine, VirtualMachineInstance
from shared.model.devopts import LinkState


def _state(value: str | None) -> str:
    return value or LinkState.UP


def _changed(vm: VirtualMachine, vmi: VirtualMachineInstance) -> list[tuple[int, str]]:
    """(index, wanted state) of each running interface whose template state differs."""
    want = vm.spec.template.spec.domain.devices.interfaces
    have = vmi.spec.domain.devices.interfaces
    if [i.name for i in want] != [i.name for i in have]:
        return []
    absent = LinkState.ABSENT  # an unplug: controller/vm/nichotplug.py
    return [
        (n, _state(w.state))
        for n, (w, h) in enumerate(zip(want, have, strict=True))
        if _state(w.state) != _state(h.state) and absent not in (w.state, h.state)
    ]


def live_paths(vm: VirtualMachine, vmi: VirtualMachineInstance) -> tuple[str, ...]:
    """The template paths of interface states that reach the running VMI live."""
    return tuple(f"spec.domain.devices.interfaces[{n}].state" for n, _ in _changed(vm, vmi))


def link_ops(vm: VirtualMachine, vmi: VirtualMachineInstance) -> list[dict[str, Any]]:
    """JSON-patch operations setting each changed interface's state on the VMI."""
    return [
        {"op": "add", "path": f"/spec/domain/devices/interfaces/{n}/state", "value": state}
        for n, state in _changed(vm, vmi)
    ]
