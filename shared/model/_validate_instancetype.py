"""Validation of the instancetype.kubevirt.io objects themselves (admission checks them
when they are made, so a bad one is named before any VM uses it): metadata and the
values KubeVirt's API takes (vCPUs, quantities, percentages, buses, models, machine type,
the spread ratio). Whether kubevirt-py honours what a value turns into is decided where
it lands: a VM applying it is refused naming the field (virt_api/admission/instancetypes)."""

from __future__ import annotations

from shared.model._validate_common import Errors, ValidationLimits, check_name, check_quantity
from shared.model._validate_domain import DISK_BUSES, MACHINE_TYPE
from shared.model._validate_volumes import INTERFACE_MODELS
from shared.model.errors import FieldError
from shared.model.instancetype import InstancetypeObject, InstancetypeSpec, PreferenceSpec
from shared.model.preference import SpreadAcross
from shared.model.quantity import format_bytes

# KubeVirt's interface models (its VMI validation's list; kubevirt-py's own is narrower).
KUBEVIRT_INTERFACE_MODELS = INTERFACE_MODELS | {"igb"}


def _positive(errs: Errors, path: str, value: int | None) -> None:
    if value is not None and value < 1:
        errs.add(path, "must be at least 1", value)


def _instancetype(errs: Errors, spec: InstancetypeSpec, limits: ValidationLimits) -> None:
    guest = spec.cpu.guest
    if guest is None:
        errs.add("spec.cpu.guest", "is required")
    elif not 1 <= guest <= limits.max_vcpus:
        errs.add("spec.cpu.guest", f"must be between 1 and {limits.max_vcpus}", guest)
    memory = check_quantity(errs, "spec.memory.guest", spec.memory.guest, required=True)
    if memory is not None and not limits.min_memory <= memory <= limits.max_memory:
        low, high = format_bytes(limits.min_memory), format_bytes(limits.max_memory)
        errs.add("spec.memory.guest", f"must be between {low} and {high}", spec.memory.guest)
    _positive(errs, "spec.cpu.maxSockets", spec.cpu.max_sockets)
    percent = spec.memory.overcommit_percent
    if percent is not None and not 0 <= percent <= 100:
        errs.add("spec.memory.overcommitPercent", "must be between 0 and 100", percent)
    max_guest = check_quantity(errs, "spec.memory.maxGuest", spec.memory.max_guest)
    if max_guest is not None and memory is not None and max_guest < memory:
        errs.add(
            "spec.memory.maxGuest", "must not be less than spec.memory.guest", spec.memory.max_guest
        )


def _preference(errs: Errors, spec: PreferenceSpec) -> None:
    devices = spec.devices
    buses = (
        ("preferredDiskBus", devices.preferred_disk_bus, DISK_BUSES),
        ("preferredCdromBus", devices.preferred_cdrom_bus, DISK_BUSES - {"virtio"}),
        ("preferredLunBus", devices.preferred_lun_bus, DISK_BUSES),
        ("preferredInterfaceModel", devices.preferred_interface_model, KUBEVIRT_INTERFACE_MODELS),
    )
    for key, value, allowed in buses:
        if value is not None and value not in allowed:
            errs.add(f"spec.devices.{key}", f"must be one of {', '.join(sorted(allowed))}", value)
    machine = spec.machine.preferred_machine_type
    if machine and not MACHINE_TYPE.fullmatch(machine):
        errs.add("spec.machine.preferredMachineType", "must be a QEMU machine type name", machine)
    _spread(errs, spec)
    grace = spec.preferred_termination_grace_period_seconds
    if grace is not None and grace < 0:
        errs.add("spec.preferredTerminationGracePeriodSeconds", "must not be negative", grace)
    needs = spec.requirements
    if needs is not None:
        _positive(errs, "spec.requirements.cpu.guest", needs.cpu.guest if needs.cpu else None)
        if needs.memory is not None:
            check_quantity(errs, "spec.requirements.memory.guest", needs.memory.guest)


def _spread(errs: Errors, spec: PreferenceSpec) -> None:
    """KubeVirt's: a ratio is at least 1, and spreading over cores and threads means 2."""
    _positive(errs, "spec.preferSpreadSocketToCoreRatio", spec.prefer_spread_socket_to_core_ratio)
    options = spec.cpu.spread_options
    if options is None:
        return
    _positive(errs, "spec.cpu.spreadOptions.ratio", options.ratio)
    if options.across == SpreadAcross.CORES_THREADS and options.ratio not in (None, 2):
        message = "only a ratio of 2 is supported when spreading vCPUs across cores and threads"
        errs.add("spec.cpu.spreadOptions.ratio", message, options.ratio)


def validate_instancetype_object(
    obj: InstancetypeObject, limits: ValidationLimits
) -> list[FieldError]:
    """Every problem of a (Cluster)Instancetype or (Cluster)Preference."""
    errs = Errors()
    check_name(errs, "metadata.name", obj.metadata.name, subdomain=True)
    spec = getattr(obj, "spec", None)
    if isinstance(spec, InstancetypeSpec):
        _instancetype(errs, spec, limits)
    elif isinstance(spec, PreferenceSpec):
        _preference(errs, spec)
    return errs.items
