"""Instancetypes and preferences applied to a VM's VMI (KubeVirt's pkg/instancetype):
pure functions over wire dicts and the typed instancetype.kubevirt.io specs.

- `instancetype_conflicts`: what admission refuses, the template setting what an
  instancetype sets (v1beta1 instancetypes always set cpu.guest and memory.guest, so a
  VM naming one must leave the template's CPU topology and guest memory alone);
- `expand_spec`: the VMI spec the VM controller creates, every instancetype and
  preference field applied as KubeVirt applies it (shared.instancetypes);
- Revisions: the objects are captured once per VM in a ControllerRevision named
  `<vm>-<kind>-<name>-<uid>-<generation>` (KubeVirt's naming, lowercase kind), whose
  `data` is the object as read, and the VM's spec.instancetype.revisionName names it:
  later edits of the instancetype never change a running VM's next VMI.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.instancetypes.apply import expand
from shared.instancetypes.target import CONFLICT
from shared.kube import Resource
from shared.model import FieldError, VirtualMachine
from shared.model._codec import copy_json
from shared.model.instancetype import (
    DEFAULT_INSTANCETYPE_KIND,
    DEFAULT_PREFERENCE_KIND,
    INSTANCETYPE_GROUP,
    INSTANCETYPE_KIND_NAMES,
    INSTANCETYPE_KINDS,
    INSTANCETYPE_VERSION,
    PREFERENCE_KIND_NAMES,
    InstancetypeMatcher,
    InstancetypeSpec,
    PreferenceSpec,
)

CONTROLLER_REVISIONS = Resource("apps", "v1", "controllerrevisions", "ControllerRevision")
RESOURCES: Mapping[str, Resource] = {
    cls.KIND: Resource(
        INSTANCETYPE_GROUP, INSTANCETYPE_VERSION, cls.PLURAL, cls.KIND, namespaced=cls.NAMESPACED
    )
    for cls in INSTANCETYPE_KINDS
}
TEMPLATE_DOMAIN = "spec.template.spec.domain"
# (wire path under the template's domain) the instancetype owns.
INSTANCETYPE_OWNED = (
    ("cpu", "sockets"),
    ("cpu", "cores"),
    ("cpu", "threads"),
    ("memory", "guest"),
    ("resources", "requests", "memory"),
)


def _dig(obj: Any, keys: tuple[str, ...]) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


# KubeVirt matches a kind case-insensitively, by kind, singular or plural resource name.
_KIND_ALIASES: Mapping[str, str] = {
    alias: cls.KIND
    for cls in INSTANCETYPE_KINDS
    for alias in (cls.KIND.lower(), cls.SINGULAR, cls.PLURAL)
}


def matcher_kind(matcher: InstancetypeMatcher, *, preference: bool) -> str:
    """The matcher's kind (canonical), KubeVirt's cluster-wide default when unset."""
    if not matcher.kind:
        return DEFAULT_PREFERENCE_KIND if preference else DEFAULT_INSTANCETYPE_KIND
    return _KIND_ALIASES.get(matcher.kind.lower(), matcher.kind)


def matcher_errors(vm: VirtualMachine) -> list[FieldError]:
    """spec.instancetype / spec.preference name an object of a kind of theirs."""
    errors: list[FieldError] = []
    pairs = (
        ("instancetype", vm.spec.instancetype, INSTANCETYPE_KIND_NAMES, False),
        ("preference", vm.spec.preference, PREFERENCE_KIND_NAMES, True),
    )
    for key, matcher, kinds, is_pref in pairs:
        if matcher is None or matcher.infer_from_volume:
            continue  # inferred at mutation (virt_api/admission/infer.py)
        if not matcher.name:
            errors.append(FieldError(path=f"spec.{key}.name", message="must be set"))
        kind = matcher_kind(matcher, preference=is_pref)
        if kind not in kinds:
            message = f"must be one of {', '.join(kinds)}"
            errors.append(FieldError(path=f"spec.{key}.kind", message=message, value=kind))
    return errors


def instancetype_conflicts(vm: VirtualMachine) -> list[FieldError]:
    """Every template field an instancetype sets, named (empty without an instancetype)."""
    if vm.spec.instancetype is None or vm.spec.instancetype.infer_from_volume:
        return []
    domain = vm.spec.template.spec.domain.to_dict()
    errors = []
    for keys in INSTANCETYPE_OWNED:
        value = _dig(domain, keys)
        if value is not None:
            path = ".".join((TEMPLATE_DOMAIN, *keys))
            message = f"VM field(s) {path} {CONFLICT}"
            errors.append(FieldError(path=path, message=message))
    return errors


def expand_spec(
    spec: Mapping[str, Any],
    *,
    instancetype: InstancetypeSpec | None,
    preference: PreferenceSpec | None,
) -> dict[str, Any]:
    """A copy of a VMI spec with the instancetype's values and the preference's defaults
    (shared.instancetypes; its conflicts are admission's to refuse)."""
    return expand(spec, instancetype=instancetype, preference=preference).spec


def revision_name(vm: VirtualMachine, obj: Mapping[str, Any]) -> str:
    """KubeVirt's ControllerRevision name for `obj` captured for `vm`."""
    meta = obj.get("metadata") or {}
    kind = str(obj.get("kind", "")).lower()
    parts = (meta.get("name", ""), meta.get("uid", ""), meta.get("generation", 0))
    return "-".join((vm.name, kind, *(str(p) for p in parts)))


def revision_body(vm: VirtualMachine, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The ControllerRevision holding `obj`, owned by the VM."""
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": revision_name(vm, obj),
            "namespace": vm.namespace,
            "ownerReferences": [vm.controller_reference().to_dict()],
        },
        "data": copy_json(obj),
        "revision": 1,
    }
