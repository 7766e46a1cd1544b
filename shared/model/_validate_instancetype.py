"""Validation of the instancetype.kubevirt.io objects themselves (admission checks them
when they are made, so a bad one is named before any VM uses it): metadata, the
instancetype's guest vCPUs and memory, the preference's buses, interface model and
machine type. Fields kubevirt-py does not honour are shared.model.unsupported's."""

from __future__ import annotations

from shared.model._validate_common import Errors, ValidationLimits, check_name, check_quantity
from shared.model._validate_domain import DISK_BUSES, MACHINE_TYPE
from shared.model._validate_volumes import INTERFACE_MODELS
from shared.model.errors import FieldError
from shared.model.instancetype import InstancetypeObject, InstancetypeSpec, PreferenceSpec
from shared.model.quantity import format_bytes


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


def _preference(errs: Errors, spec: PreferenceSpec) -> None:
    devices = spec.devices
    buses = (
        ("preferredDiskBus", devices.preferred_disk_bus, DISK_BUSES),
        ("preferredCdromBus", devices.preferred_cdrom_bus, DISK_BUSES - {"virtio"}),
        ("preferredInterfaceModel", devices.preferred_interface_model, INTERFACE_MODELS),
    )
    for key, value, allowed in buses:
        if value is not None and value not in allowed:
            errs.add(f"spec.devices.{key}", f"must be one of {', '.join(sorted(allowed))}", value)
    machine = spec.machine.preferred_machine_type
    if machine and not MACHINE_TYPE.fullmatch(machine):
        errs.add("spec.machine.preferredMachineType", "must be a QEMU machine type name", machine)


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
