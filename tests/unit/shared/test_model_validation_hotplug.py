"""maxSockets and maxGuest at admission: sockets or guest memory above them are refused,
naming the field, in a VMI and in a VM's template."""

from __future__ import annotations

from typing import Any

from shared.model import VirtualMachine, VirtualMachineInstance
from shared.model.validation import validate_vm, validate_vmi


def domain(sockets: int, guest: str) -> dict[str, Any]:
    return {
        "cpu": {"sockets": sockets, "maxSockets": 2},
        "memory": {"guest": guest, "maxGuest": "2Gi"},
        "devices": {},
    }


def test_within_the_ceilings_is_valid() -> None:
    """sockets 2 of maxSockets 2 and 2Gi of maxGuest 2Gi pass."""
    vmi = VirtualMachineInstance.from_dict({"spec": {"domain": domain(2, "2Gi")}})
    assert [e.path for e in validate_vmi(vmi) if "max" in e.message.lower()] == []


def test_above_the_ceilings_names_the_fields() -> None:
    """A VM template asking for 3 sockets and 3Gi over maxSockets 2 / maxGuest 2Gi: both
    template fields are named."""
    vm = VirtualMachine.from_dict(
        {"metadata": {"name": "a"},
         "spec": {"template": {"spec": {"domain": domain(3, "3Gi")}}}}
    )  # fmt: skip
    paths = {e.path for e in validate_vm(vm)}
    assert "spec.template.spec.domain.cpu.sockets" in paths
    assert "spec.template.spec.domain.memory.guest" in paths


def test_a_bad_ceiling_is_refused() -> None:
    """maxSockets 0 and a malformed maxGuest are named."""
    spec = {"domain": {"cpu": {"maxSockets": 0}, "memory": {"guest": "1Gi", "maxGuest": "x"}}}
    paths = {e.path for e in validate_vmi(VirtualMachineInstance.from_dict({"spec": spec}))}
    assert {"spec.domain.cpu.maxSockets", "spec.domain.memory.maxGuest"} <= paths
