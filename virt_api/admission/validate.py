"""What admission refuses (virt-api's validating webhook): every problem, with its field
path, in one answer. Pure functions over wire dicts, plus the one lookup a migration needs.

- The object must parse into the model (a type error names its path);
- the model's validation (shared.model.validation; a replica set's template as a VMI);
- a VM's instancetype and preference named with a kind of theirs, and no template field
  an instancetype sets (shared.expansion), and
- every field kubevirt-py would not honour (shared.model.unsupported);
- the instancetype.kubevirt.io objects themselves: their values and fields;
- the KubeVirt CR's configuration (shared.clusterconfig), naming the field.
- CDI's DataVolumes: one source kubevirt-py imports and a size (the fields named).
- snapshot.kubevirt.io snapshots and restores (virt_api/admission/snapshots.py).
An UPDATE that leaves the spec as it was is allowed as it is: metadata edits (labels,
finalizers) of objects admitted earlier must never be blocked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from shared.backupcbt import cbt_selector_errors
from shared.clusterconfig import validate_kubevirt
from shared.expansion import instancetype_conflicts, matcher_errors
from shared.migrationpolicy import validate_policy
from shared.model import (
    FieldError,
    KubeObject,
    ParseError,
    VirtualMachine,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VirtualMachineInstanceReplicaSet,
)
from shared.model._validate_instancetype import validate_instancetype_object
from shared.model._validate_replicaset import validate_pool, validate_replicaset
from shared.model.backup import VirtualMachineBackup, VirtualMachineBackupTracker
from shared.model.clone import VirtualMachineClone
from shared.model.datavolume import DataVolume
from shared.model.datavolume_spec import datavolume_errors
from shared.model.export import VirtualMachineExport, export_errors
from shared.model.instancetype import INSTANCETYPE_KINDS, InstancetypeObject
from shared.model.kubevirt import KubeVirt
from shared.model.meta import ObjectMeta
from shared.model.migrationpolicy import MigrationPolicy
from shared.model.pool import VirtualMachinePool
from shared.model.snapshot import VirtualMachineRestore, VirtualMachineSnapshot
from shared.model.unsupported import unsupported_fields
from shared.model.validation import (
    ValidationLimits,
    validate_migration,
    validate_vm,
    validate_vmi,
)
from virt_api.admission.backups import validate_backup, validate_tracker
from virt_api.admission.snapshots import validate_clone, validate_restore, validate_snapshot

_DEFAULT_LIMITS = ValidationLimits()
_Validator = Callable[[Any, ValidationLimits], list[FieldError]]


def _validate_vmi(vmi: VirtualMachineInstance, limits: ValidationLimits) -> list[FieldError]:
    return validate_vmi(vmi, limits=limits)


def _validate_vm(vm: VirtualMachine, limits: ValidationLimits) -> list[FieldError]:
    """The VM's own rules, its instancetype/preference matchers and conflicts."""
    return [
        *validate_vm(vm, limits=limits),
        *matcher_errors(vm),
        *instancetype_conflicts(vm),
        *_template_errors(vm),
    ]


def _template_errors(vm: VirtualMachine) -> list[FieldError]:
    """Each dataVolumeTemplate: a name, and a spec a DataVolume of it would be admitted with."""
    errors = []
    for i, template in enumerate(vm.spec.data_volume_templates):
        path = f"spec.dataVolumeTemplates[{i}]"
        meta = template.extra.get("metadata")
        if not isinstance(meta, Mapping) or not meta.get("name"):
            errors.append(FieldError(path=f"{path}.metadata.name", message="is required"))
        raw = {"metadata": {"namespace": vm.namespace}, "spec": template.extra.get("spec") or {}}
        try:
            dv = DataVolume.from_dict(raw)
        except ParseError as e:
            errors.append(FieldError(path=f"{path}.{e.path}", message=e.message))
            continue
        errors += [
            FieldError(path=f"{path}.{e.path}", message=e.message) for e in datavolume_errors(dv)
        ]
    return errors


def _validate_datavolume(dv: DataVolume, _: ValidationLimits) -> list[FieldError]:
    """CDI's DataVolume: one source kubevirt-py imports, a size (controller/datavolume/)."""
    return datavolume_errors(dv)


def _validate_export(vme: VirtualMachineExport, _: ValidationLimits) -> list[FieldError]:
    """A VirtualMachineExport: a source kind kubevirt-py exports, a name, a ttlDuration."""
    return export_errors(vme)


def _validate_migration(
    migration: VirtualMachineInstanceMigration, _: ValidationLimits
) -> list[FieldError]:
    return validate_migration(migration)


def _validate_kubevirt(kv: KubeVirt, _: ValidationLimits) -> list[FieldError]:
    return [*validate_kubevirt(kv), *cbt_selector_errors(kv)]


def _validate_policy(policy: MigrationPolicy, _: ValidationLimits) -> list[FieldError]:
    return validate_policy(policy)


def _validate_replicaset(
    rs: VirtualMachineInstanceReplicaSet, limits: ValidationLimits
) -> list[FieldError]:
    return validate_replicaset(rs, limits=limits)


def _validate_pool(pool: VirtualMachinePool, limits: ValidationLimits) -> list[FieldError]:
    """The pool's own rules, and its dataVolumeTemplates as a VM's (each VM gets them)."""
    errors = validate_pool(pool, limits=limits)
    template = pool.spec.virtual_machine_template
    if template is not None:
        vm = VirtualMachine(metadata=ObjectMeta(namespace=pool.namespace), spec=template.spec)
        where = "spec.virtualMachineTemplate."
        errors += [dataclasses.replace(e, path=where + e.path) for e in _template_errors(vm)]
    return errors


KINDS: Mapping[str, tuple[type[KubeObject] | type[InstancetypeObject], _Validator]] = {
    VirtualMachineInstance.KIND: (VirtualMachineInstance, _validate_vmi),
    VirtualMachine.KIND: (VirtualMachine, _validate_vm),
    VirtualMachineInstanceMigration.KIND: (VirtualMachineInstanceMigration, _validate_migration),
    KubeVirt.KIND: (KubeVirt, _validate_kubevirt),
    MigrationPolicy.KIND: (MigrationPolicy, _validate_policy),
    VirtualMachineInstanceReplicaSet.KIND: (VirtualMachineInstanceReplicaSet, _validate_replicaset),
    VirtualMachinePool.KIND: (VirtualMachinePool, _validate_pool),
    **{cls.KIND: (cls, validate_instancetype_object) for cls in INSTANCETYPE_KINDS},
    DataVolume.KIND: (DataVolume, _validate_datavolume),
    VirtualMachineExport.KIND: (VirtualMachineExport, _validate_export),
    VirtualMachineSnapshot.KIND: (VirtualMachineSnapshot, validate_snapshot),
    VirtualMachineRestore.KIND: (VirtualMachineRestore, validate_restore),
    VirtualMachineClone.KIND: (VirtualMachineClone, validate_clone),
    VirtualMachineBackup.KIND: (VirtualMachineBackup, validate_backup),
    VirtualMachineBackupTracker.KIND: (VirtualMachineBackupTracker, validate_tracker),
}


def _unique(errors: Sequence[FieldError]) -> list[FieldError]:
    seen: set[tuple[str, str]] = set()
    out = []
    for e in errors:
        if (e.path, e.message) not in seen:
            seen.add((e.path, e.message))
            out.append(e)
    return out


def validate(
    kind: str,
    obj: Mapping[str, Any],
    *,
    old: Mapping[str, Any] | None = None,
    limits: ValidationLimits = _DEFAULT_LIMITS,
) -> list[FieldError]:
    """Every problem of a VMI, VM, VMIM or instancetype / preference (other kinds: none);
    `limits` says whether guests may run under emulation."""
    if kind not in KINDS:
        return []
    if old is not None and obj.get("spec") == old.get("spec"):
        return []
    cls, rules = KINDS[kind]
    try:
        model = cls.from_dict(obj)
    except ParseError as e:
        return [FieldError(path=e.path, message=e.message)]
    return _unique([*rules(model, limits), *unsupported_fields(model)])


class VMILookup(Protocol):
    """Reads one VMI's wire dict; None when it does not exist."""

    async def __call__(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...


async def migration_target_errors(
    obj: Mapping[str, Any], *, namespace: str, lookup: VMILookup
) -> list[FieldError]:
    """A new migration's VMI exists and has not finished (KubeVirt's VMIM admitter)."""
    spec = obj.get("spec")
    name = spec.get("vmiName") if isinstance(spec, Mapping) else None
    if not isinstance(name, str) or not name:
        return []  # validate() names the missing field
    vmi = await lookup(namespace, name)
    path = "spec.vmiName"
    if vmi is None:
        message = f"VirtualMachineInstance {name!r} does not exist in namespace {namespace!r}"
        return [FieldError(path=path, message=message, value=name)]
    try:
        parsed = VirtualMachineInstance.from_dict(vmi)
    except ParseError:
        return []
    if parsed.is_final():
        phase = str(parsed.status.phase_or_unset)
        message = f"VirtualMachineInstance {name!r} has finished ({phase}): nothing to migrate"
        return [FieldError(path=path, message=message, value=name)]
    return []
