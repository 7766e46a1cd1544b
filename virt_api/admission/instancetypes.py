"""A VM's instancetype and preference at VM admission, as KubeVirt's VM admitter checks
them: both exist (or their captured revisions do), the preference's requirements are met,
the instancetype's fields do not conflict with the template's, and the VMI the VM would
make (the template expanded with both, then defaulted as the VMI's own admission does)
carries nothing kubevirt-py refuses: such an error names the instancetype or preference
field and the VMI field it sets (shared.instancetypes.apply.attribute).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.expansion import CONTROLLER_REVISIONS, RESOURCES, matcher_kind
from shared.instancetypes.apply import attribute, expand
from shared.instancetypes.requirements import requirement_errors
from shared.instancetypes.target import Source
from shared.model import FieldError, ParseError, VirtualMachine, VirtualMachineInstance
from shared.model.instancetype import InstancetypeMatcher, InstancetypeSpec, PreferenceSpec
from shared.model.unsupported import unsupported_fields
from shared.model.validation import ValidationLimits, validate_vmi
from virt_api.admission.defaults import Defaults, default_vmi_spec
from virt_api.admission.snapshots import ObjectLookup


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """One matcher resolved: how to name the object, and its spec."""

    name: str  # e.g. VirtualMachineClusterInstancetype "u1.small"
    spec: InstancetypeSpec | PreferenceSpec | None = None
    error: FieldError | None = None


async def _find(
    vm: VirtualMachine, matcher: InstancetypeMatcher, source: Source, lookup: ObjectLookup
) -> Found:
    preference = source == Source.PREFERENCE
    kind = matcher_kind(matcher, preference=preference)
    name = f'{kind} "{matcher.name}"'
    path = f"spec.{source}"
    if matcher.revision_name:
        rev = await lookup(CONTROLLER_REVISIONS, vm.namespace, matcher.revision_name)
        data = rev.get("data") if rev is not None else None
        what = f"revision {matcher.revision_name!r} of {name}"
    elif kind in RESOURCES and matcher.name:
        resource = RESOURCES[kind]
        data = await lookup(resource, vm.namespace if resource.namespaced else "", matcher.name)
        what = name
    else:
        return Found(name=name)  # validate() names the bad matcher
    if not isinstance(data, Mapping):
        message = f"Failure to find {source}: {what} not found"
        return Found(name=name, error=FieldError(path=path, message=message))
    cls = PreferenceSpec if preference else InstancetypeSpec
    try:
        return Found(name=name, spec=cls.from_dict(data.get("spec") or {}))
    except ParseError as e:
        message = f"{what} is not a valid {source}: {e}"
        return Found(name=name, error=FieldError(path=path, message=message))


def _vmi_errors(
    vm: VirtualMachine, spec: Mapping[str, Any], limits: ValidationLimits
) -> dict[tuple[str, str], FieldError]:
    """The errors of a VMI of `spec`, by (path, message)."""
    meta = {"name": vm.name or "vm", "namespace": vm.namespace}
    try:
        vmi = VirtualMachineInstance.from_dict({"metadata": meta, "spec": spec})
    except ParseError as e:
        return {(e.path, e.message): FieldError(path=e.path, message=e.message)}
    errors = [*validate_vmi(vmi, limits=limits), *unsupported_fields(vmi)]
    return {(e.path, e.message): e for e in errors}


async def instancetype_errors(
    vm: VirtualMachine, *, lookup: ObjectLookup, defaults: Defaults, limits: ValidationLimits
) -> list[FieldError]:
    """Every problem the VM's instancetype and preference give it ([] without them)."""
    found: dict[Source, Found] = {}
    for source, matcher in (
        (Source.INSTANCETYPE, vm.spec.instancetype),
        (Source.PREFERENCE, vm.spec.preference),
    ):
        if matcher is not None and not matcher.infer_from_volume:
            found[source] = await _find(vm, matcher, source, lookup)
    errors = [f.error for f in found.values() if f.error is not None]
    if errors or not found:
        return errors
    it, pref = found.get(Source.INSTANCETYPE), found.get(Source.PREFERENCE)
    instancetype = it.spec if it is not None and isinstance(it.spec, InstancetypeSpec) else None
    preference = pref.spec if pref is not None and isinstance(pref.spec, PreferenceSpec) else None
    template = vm.spec.template.spec.to_dict()
    errors = requirement_errors(template, instancetype=instancetype, preference=preference)
    if errors:
        return errors
    annotations = vm.spec.template.metadata.annotations
    expanded = expand(
        template, annotations=annotations, instancetype=instancetype, preference=preference
    )
    if expanded.conflicts:
        return list(expanded.conflicts)
    before = _vmi_errors(vm, default_vmi_spec(template, defaults), limits)
    after = _vmi_errors(vm, default_vmi_spec(expanded.spec, defaults), limits)
    new = [error for key, error in sorted(after.items()) if key not in before]
    names = {source: f.name for source, f in found.items()}
    return attribute(new, expanded, names=names)


async def with_preferred_storage_class(
    spec: dict[str, Any], *, namespace: str, lookup: ObjectLookup
) -> dict[str, Any]:
    """KubeVirt's VM mutator: a preference's volumes.preferredStorageClassName goes to every
    dataVolumeTemplate (pvc or storage) that names no storage class. `spec` is changed."""
    templates = spec.get("dataVolumeTemplates")
    if not templates or not isinstance(spec.get("preference"), dict):
        return spec
    try:
        vm = VirtualMachine.from_dict({"metadata": {"namespace": namespace}, "spec": spec})
    except ParseError:
        return spec  # validation names it
    matcher = vm.spec.preference
    if matcher is None or matcher.infer_from_volume:
        return spec
    found = await _find(vm, matcher, Source.PREFERENCE, lookup)
    if not isinstance(found.spec, PreferenceSpec):
        return spec  # a missing preference is the validator's to name
    storage_class = found.spec.volumes.preferred_storage_class_name
    for template in templates if storage_class else ():
        for key in ("pvc", "storage"):
            target = (template.get("spec") or {}).get(key) if isinstance(template, dict) else None
            if isinstance(target, dict) and target.get("storageClassName") is None:
                target["storageClassName"] = storage_class
    return spec
