"""The one list of kubevirt.io/v1 fields kubevirt-py does not implement, and the check
that refuses them (admission uses it, so nothing a user writes is silently dropped).

The model keeps every key it does not type in `extra`. Walking a parsed object, each
key found in an `extra` is one of:
- typed by the model but present-but-empty (explicit null, `[]`, `{}`): kept, fine;
- a field KubeVirt's API knows at that place: "not supported by kubevirt-py"
  (`KUBEVIRT_ONLY`, in shared/model/kubevirt_only.py), unless `ALLOWED_VALUES` lists the
  value as one honoured here;
- anything else: an unknown field, which KubeVirt's schema would prune and a strict
  `kubectl apply` refuses, so it is refused here too.
The instancetype.kubevirt.io kinds are walked the same way (their v1beta1 fields).
Some fields are typed by the model but honoured by no daemon yet (`TYPED_UNSUPPORTED`):
they are refused when set. Metadata and status are not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.model._codec import ListCodec, Model, ModelCodec, plan_of
from shared.model._unsupported_decentral import decentral_unsupported
from shared.model._validate_common import child_path
from shared.model.domain import (
    Devices,
    Interface,
)
from shared.model.errors import FieldError
from shared.model.instancetype import (
    InstancetypeObject,
    InstancetypeSpec,
    PreferenceSpec,
)
from shared.model.kubevirt_only import ANY_KEY, KUBEVIRT_ONLY
from shared.model.migration import (
    VirtualMachineInstanceMigration,
)
from shared.model.objects import KubeObject
from shared.model.pool import (
    VirtualMachinePool,
)
from shared.model.preference import VMIPart
from shared.model.replicaset import VirtualMachineInstanceReplicaSet
from shared.model.scheduling import (
    Affinity,
    TopologySpreadConstraint,
)
from shared.model.vm import DataVolumeTemplateSpec, VirtualMachine
from shared.model.vmi import VirtualMachineInstance, VMISpec

NOT_SUPPORTED = "not supported by kubevirt-py"
UNKNOWN_FIELD = "unknown field (not part of kubevirt.io/v1)"

# Kubernetes' own types, handed to the launcher pod whole: the API server validates their
# keys when the pod is made, so they are not walked here.
# A DataVolume template is CDI's: the DataVolume controller names its bad fields.
# A VMIPart is a kubevirt.io/v1 object an instancetype or preference hands to the VMI whole:
# checked in the VMI it lands in (shared.instancetypes), not in the instancetype object.
KUBERNETES_OWN: frozenset[type[Model]] = frozenset(
    {Affinity, TopologySpreadConstraint, DataVolumeTemplateSpec, VMIPart}
)

# KubeVirt fields whose value is what kubevirt-py does anyway (or what admission
# honours: no pod network is added when autoattachPodInterface is false).
ALLOWED_VALUES: Mapping[tuple[type[Model], str], tuple[Any, ...]] = {
    (Devices, "autoattachPodInterface"): (True, False),
    (Devices, "autoattachGraphicsDevice"): (True, False),
    (VMISpec, "architecture"): ("amd64",),  # the only one kubevirt-py runs
}

# KubeVirt fields KubeVirt itself refuses now (its own message): their plugins replace them.
DISCONTINUED: Mapping[tuple[type[Model], str], str] = {
    (Interface, "slirp"): "Slirp interface support has been discontinued since v1.3",
    (Interface, "macvtap"): "Macvtap network binding has been discontinued since v1.3 "
    "(use binding: {name: macvtap}, registered with domainAttachmentType tap)",
    (Interface, "passt"): "Passt network binding has been discontinued since v1.3 "
    "(use passtBinding, or binding: {name: passt})",
}

# Typed by the model, honoured by no daemon yet: refused whenever set.
# (Decentralized live migration runs in one cluster; what it does not run is refused by
# shared/model/_unsupported_decentral.py.)
TYPED_UNSUPPORTED: Mapping[type[Model], frozenset[str]] = {}

# Typed values honoured by no daemon yet: refused whenever set, naming the field.
UNSUPPORTED_VALUES: Mapping[tuple[type[Model], str], tuple[Any, ...]] = {}

# The top-level objects: only spec is checked (metadata is Kubernetes', status is ours).
_TOP_LEVEL_KEYS = frozenset({"apiVersion", "kind", "metadata", "spec", "status"})


def unsupported_fields(obj: KubeObject | InstancetypeObject) -> list[FieldError]:
    """Every field of `obj` (a VMI, VM, VMIM or an instancetype.kubevirt.io object) that
    kubevirt-py would not honour."""
    errors: list[FieldError] = []
    for key in obj.extra:
        if key not in _TOP_LEVEL_KEYS:
            errors.append(FieldError(path=key, message=UNKNOWN_FIELD))
    spec = _spec_of(obj)
    if spec is not None:
        _walk(errors, "spec", spec)
    if isinstance(obj, KubeObject):
        errors += decentral_unsupported(obj)
    return errors


def _spec_of(obj: KubeObject | InstancetypeObject) -> Model | None:
    if isinstance(
        obj,
        VirtualMachineInstance
        | VirtualMachine
        | VirtualMachineInstanceMigration
        | VirtualMachineInstanceReplicaSet
        | VirtualMachinePool,
    ):
        return obj.spec
    spec = getattr(obj, "spec", None)  # the four instancetype kinds
    return spec if isinstance(spec, InstancetypeSpec | PreferenceSpec) else None


def _typed_unsupported(errors: list[FieldError], path: str, model: Model) -> None:
    plan = plan_of(type(model))
    for key in sorted(TYPED_UNSUPPORTED.get(type(model), frozenset())):
        fp = plan.by_key[key]
        value = getattr(model, fp.attr)
        if not fp.is_empty(value):
            wire = value.to_dict() if isinstance(value, Model) else value
            errors.append(FieldError(path=child_path(path, key), message=NOT_SUPPORTED, value=wire))
    for (cls, key), refused in UNSUPPORTED_VALUES.items():
        if cls is type(model):
            value = getattr(model, plan.by_key[key].attr)
            if value in refused:
                errors.append(
                    FieldError(path=child_path(path, key), message=NOT_SUPPORTED, value=value)
                )


def _walk(errors: list[FieldError], path: str, model: Model) -> None:
    """Check `model`'s own keys, then every nested model (metadata excepted)."""
    cls = type(model)
    if cls in KUBERNETES_OWN:
        return
    plan = plan_of(cls)
    known = KUBEVIRT_ONLY.get(cls, frozenset())
    for key, value in model.extra.items():
        if key in plan.by_key:
            continue  # typed, present but empty
        where = child_path(path, key)
        if key in known or ANY_KEY in known:
            if value in ALLOWED_VALUES.get((cls, key), ()):
                continue
            message = DISCONTINUED.get((cls, key), NOT_SUPPORTED)
            errors.append(FieldError(path=where, message=message, value=value))
        else:
            errors.append(FieldError(path=where, message=UNKNOWN_FIELD))
    _typed_unsupported(errors, path, model)
    for fp in plan.fields:
        if fp.key == "metadata":
            continue
        value = getattr(model, fp.attr)
        if isinstance(fp.codec, ModelCodec) and isinstance(value, Model):
            _walk(errors, child_path(path, fp.key), value)
        elif isinstance(fp.codec, ListCodec) and isinstance(fp.codec.item, ModelCodec):
            for i, item in enumerate(value):
                _walk(errors, f"{child_path(path, fp.key)}[{i}]", item)
