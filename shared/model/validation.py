"""Validation of VMIs, VMs and migrations: every problem, each with its JSON field path.

`validate_vmi` and friends return a list of FieldError (empty when valid); the
`require_valid_*` helpers raise the typed InvalidVMI / InvalidVM / InvalidMigration
carrying that list. Names with XML metacharacters are simply invalid DNS-1123 names; the
domain XML builder escapes everything regardless.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared.model._validate_common import (
    Errors,
    ValidationLimits,
    check_name,
    check_strings,
)
from shared.model._validate_cpufeatures import validate_cpu_features
from shared.model._validate_credentials import validate_access_credentials
from shared.model._validate_decentral import check_decentralized, check_restore_run_strategy
from shared.model._validate_devices import validate_clock, validate_devices, validate_features
from shared.model._validate_devopts import validate_device_options
from shared.model._validate_devtags import validate_luns_and_tags
from shared.model._validate_domain import (
    DISK_BUS_LIMITS,
    DISK_BUSES,
    validate_cpu,
    validate_disks,
    validate_kernel_boot,
    validate_machine,
    validate_memory,
)
from shared.model._validate_filesystems import validate_filesystems
from shared.model._validate_firmware import validate_acpi, validate_cpu_model, validate_firmware
from shared.model._validate_labels import check_label_map
from shared.model._validate_noderes import validate_node_resources
from shared.model._validate_pod import validate_pod_fields
from shared.model._validate_probes import validate_probes
from shared.model._validate_volumes import INTERFACE_MODELS, validate_networks, validate_volumes
from shared.model.errors import FieldError, InvalidMigration, InvalidVM, InvalidVMI
from shared.model.meta import ObjectMeta
from shared.model.vmi import VirtualMachineInstance, VMISpec

if TYPE_CHECKING:  # annotations only: a VMI's validation (the launcher's) loads no VM model
    from shared.model.migration import VirtualMachineInstanceMigration
    from shared.model.vm import VirtualMachine

__all__ = [
    "DISK_BUSES",
    "DISK_BUS_LIMITS",
    "INTERFACE_MODELS",
    "FieldError",
    "ValidationLimits",
    "require_valid_migration",
    "require_valid_vm",
    "require_valid_vmi",
    "validate_migration",
    "validate_vm",
    "validate_vmi",
    "validate_vmi_spec",
]

_DEFAULT_LIMITS = ValidationLimits()


def _validate_metadata(errs: Errors, meta: ObjectMeta, *, name_required: bool) -> None:
    """metadata.name (or generateName) and namespace, plus string hygiene."""
    if meta.name or name_required or not meta.generate_name:
        check_name(errs, "metadata.name", meta.name, subdomain=True)
    if meta.namespace is not None:
        check_name(errs, "metadata.namespace", meta.namespace)
    check_strings(errs, "metadata", meta.to_dict())


def validate_vmi_spec(
    spec: VMISpec,
    *,
    path: str = "spec",
    limits: ValidationLimits = _DEFAULT_LIMITS,
    memory_required: bool = True,
) -> list[FieldError]:
    """Every problem in a VMI spec, with paths rooted at `path` (a VM template whose
    instancetype gives the memory: `memory_required` false)."""
    errs = Errors()
    domain_path = f"{path}.domain"
    validate_cpu(errs, domain_path, spec.domain, limits)
    validate_memory(errs, domain_path, spec.domain, limits, required=memory_required)
    validate_disks(errs, path, spec)
    validate_filesystems(errs, path, spec)
    validate_luns_and_tags(errs, path, spec)
    validate_volumes(errs, path, spec, limits)
    validate_networks(errs, path, spec)
    validate_device_options(errs, path, spec)
    validate_kernel_boot(errs, domain_path, spec.domain)
    validate_machine(errs, domain_path, spec.domain)
    validate_firmware(errs, domain_path, spec.domain)
    validate_acpi(errs, path, spec)
    validate_cpu_model(errs, domain_path, spec.domain, limits)
    validate_devices(errs, domain_path, spec.domain)
    validate_clock(errs, domain_path, spec.domain.clock)
    validate_features(errs, domain_path, spec.domain.features)
    validate_cpu_features(errs, domain_path, spec.domain)
    validate_node_resources(errs, domain_path, spec.domain)
    validate_pod_fields(errs, path, spec)
    validate_probes(errs, path, spec)
    validate_access_credentials(errs, path, spec)
    grace = spec.termination_grace_period_seconds
    if grace is not None and grace < 0:
        errs.add(f"{path}.terminationGracePeriodSeconds", "must not be negative", grace)
    check_strings(errs, path, spec.to_dict())
    return errs.items


def validate_vmi(
    vmi: VirtualMachineInstance, *, limits: ValidationLimits = _DEFAULT_LIMITS
) -> list[FieldError]:
    """Every problem in a VMI's metadata and spec (status is not validated)."""
    errs = Errors()
    _validate_metadata(errs, vmi.metadata, name_required=True)
    return errs.items + validate_vmi_spec(vmi.spec, limits=limits)


def validate_vm(
    vm: VirtualMachine, *, limits: ValidationLimits = _DEFAULT_LIMITS
) -> list[FieldError]:
    """Every problem in a VM: its metadata, run strategy and template."""
    errs = Errors()
    _validate_metadata(errs, vm.metadata, name_required=False)
    check_restore_run_strategy(errs, vm.metadata)
    if vm.spec.run_strategy is not None and vm.spec.running is not None:
        errs.add("spec.running", "running and runStrategy are mutually exclusive", vm.spec.running)
    check_strings(errs, "spec.template.metadata", vm.spec.template.metadata.to_dict())
    spec_errors = validate_vmi_spec(
        vm.spec.template.spec,
        path="spec.template.spec",
        limits=limits,
        memory_required=vm.spec.instancetype is None,
    )
    return errs.items + spec_errors


def validate_migration(migration: VirtualMachineInstanceMigration) -> list[FieldError]:
    """A migration names its VMI with a valid name; its addedNodeSelector is node labels;
    its decentralized halves (sendTo / receive) are well formed."""
    errs = Errors()
    _validate_metadata(errs, migration.metadata, name_required=False)
    check_name(errs, "spec.vmiName", migration.spec.vmi_name, subdomain=True)
    check_label_map(errs, "spec.addedNodeSelector", migration.spec.added_node_selector)
    check_decentralized(errs, migration.spec)
    return errs.items


def require_valid_vmi(
    vmi: VirtualMachineInstance, *, limits: ValidationLimits = _DEFAULT_LIMITS
) -> None:
    """Raise InvalidVMI listing every problem, if there is any."""
    errors = validate_vmi(vmi, limits=limits)
    if errors:
        raise InvalidVMI(errors, name=vmi.key)


def require_valid_vm(vm: VirtualMachine, *, limits: ValidationLimits = _DEFAULT_LIMITS) -> None:
    """Raise InvalidVM listing every problem, if there is any."""
    errors = validate_vm(vm, limits=limits)
    if errors:
        raise InvalidVM(errors, name=vm.key)


def require_valid_migration(migration: VirtualMachineInstanceMigration) -> None:
    """Raise InvalidMigration listing every problem, if there is any."""
    errors = validate_migration(migration)
    if errors:
        raise InvalidMigration(errors, name=migration.key)
