"""A preference's requirements (spec.requirements), checked at VM admission with
KubeVirt's messages: the instancetype's vCPUs and memory, or, without one, the template's
in the preferred topology; the architecture (kubevirt-py runs amd64 guests)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.instancetypes.sizing import preferred_topology, spread_options
from shared.instancetypes.target import dig
from shared.model.errors import FieldError, QuantityError
from shared.model.instancetype import InstancetypeSpec
from shared.model.preference import PreferenceSpec, PreferredCPUTopology, SpreadAcross
from shared.model.quantity import parse_quantity

PREFIX = "failure checking preference requirements: "
CPU_PATH = "spec.template.spec.domain.cpu"
DEFAULT_ARCHITECTURE = "amd64"
_TOPOLOGY_KEYS: Mapping[PreferredCPUTopology, tuple[str, ...]] = {
    PreferredCPUTopology.SOCKETS: ("sockets",),
    PreferredCPUTopology.CORES: ("cores",),
    PreferredCPUTopology.THREADS: ("threads",),
    PreferredCPUTopology.ANY: ("cores", "sockets", "threads"),
}
_SPREAD_KEYS: Mapping[SpreadAcross, tuple[str, ...]] = {
    SpreadAcross.SOCKETS_CORES: ("sockets", "cores"),
    SpreadAcross.CORES_THREADS: ("cores", "threads"),
    SpreadAcross.SOCKETS_CORES_THREADS: ("sockets", "cores", "threads"),
}


def _error(path: str, message: str) -> list[FieldError]:
    return [FieldError(path=path, message=PREFIX + message)]


def _count(cpu: Mapping[str, Any], key: str) -> int:
    value = cpu.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _cpu(
    need: int, instancetype: InstancetypeSpec | None, preference: PreferenceSpec, vmi: Any
) -> list[FieldError]:
    if instancetype is not None:
        have = instancetype.cpu.guest or 0
        if have >= need:
            return []
        message = (
            f"insufficient CPU resources of {have} vCPU provided by instance type, "
            f"preference requires {need} vCPU"
        )
        return _error("spec.instancetype", message)
    cpu = dig(vmi, ("domain", "cpu"))
    if not isinstance(cpu, Mapping):
        message = f"no CPU resources provided by VirtualMachine, preference requires {need} vCPU"
        return _error(CPU_PATH, message)
    topology = preferred_topology(preference)
    if topology == PreferredCPUTopology.SPREAD:
        across = spread_options(preference)[1]
        keys, what = _SPREAD_KEYS[across], str(across)
    else:
        keys = _TOPOLOGY_KEYS[topology]
        what = "cores, sockets and threads" if len(keys) > 1 else keys[0]
    have = 1
    for key in keys:
        have *= _count(cpu, key)
    if have >= need:
        return []
    message = (
        f"insufficient CPU resources of {have} vCPU provided by VirtualMachine, "
        f"preference requires {need} vCPU provided as {what}"
    )
    return _error(", ".join(f"{CPU_PATH}.{k}" for k in keys), message)


def _less(have: Any, need: str | int) -> bool:
    try:
        return parse_quantity(have) < parse_quantity(need)
    except QuantityError:
        return False  # validation names a malformed quantity


def _memory(need: str | int, instancetype: InstancetypeSpec | None, vmi: Any) -> list[FieldError]:
    if instancetype is not None:
        have = instancetype.memory.guest
        if have is not None and _less(have, need):
            message = (
                f"insufficient Memory resources of {have} provided by instance type, "
                f"preference requires {need}"
            )
            return _error("spec.instancetype", message)
        return []
    guest = dig(vmi, ("domain", "memory", "guest"))
    if guest is not None and _less(guest, need):
        message = (
            f"insufficient Memory resources of {guest} provided by VirtualMachine, "
            f"preference requires {need}"
        )
        return _error("spec.template.spec.domain.memory", message)
    return []


def requirement_errors(
    vmi_spec: Mapping[str, Any],
    *,
    instancetype: InstancetypeSpec | None,
    preference: PreferenceSpec | None,
) -> list[FieldError]:
    """The first unmet requirement of `preference` (KubeVirt reports one), [] when met;
    `vmi_spec` is the VM's template spec, before any expansion."""
    needs = preference.requirements if preference is not None else None
    if preference is None or needs is None:
        return []
    if needs.cpu is not None and needs.cpu.guest:
        errors = _cpu(needs.cpu.guest, instancetype, preference, vmi_spec)
        if errors:
            return errors
    if needs.memory is not None and needs.memory.guest is not None:
        errors = _memory(needs.memory.guest, instancetype, vmi_spec)
        if errors:
            return errors
    if needs.architecture:
        # KubeVirt's VM mutator sets the preferred architecture before this check.
        arch = (
            vmi_spec.get("architecture")
            or preference.preferred_architecture
            or DEFAULT_ARCHITECTURE
        )
        if arch != needs.architecture:
            want = needs.architecture
            message = f"preference requires architecture {want} but {arch} is being requested"
            return _error("spec.template.spec.architecture", message)
    return []
