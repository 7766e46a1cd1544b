"""inferFromVolume at VM admission (KubeVirt's VM mutator, pkg/instancetype/infer): a VM's
spec.instancetype / spec.preference naming a volume instead of an object gets the name and
kind from that volume's labels (`instancetype.kubevirt.io/default-instancetype`,
`…-kind`, `…/default-preference`, `…-kind`), looked up the way KubeVirt does:

    persistentVolumeClaim → the claim's labels
    dataVolume → the VM's dataVolumeTemplate of that name (its source claim or DataSource),
                 else the DataVolume's labels, then its source claim or DataSource;
                 a DataVolume gone (garbage collected) → the claim of the same name
    DataSource → its labels, then its source claim

With inferFromVolumeFailurePolicy Ignore, a volume that cannot say (another volume type,
no label, an unsupported source) leaves the VM without that matcher; anything else (no
such volume, a lookup that fails) refuses the VM, KubeVirt's message naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.kube import DATAVOLUMES, PVCS, Resource
from shared.model import FieldError
from shared.model._codec import copy_json
from shared.model.instancetype import (
    DEFAULT_INSTANCETYPE_KIND_LABEL,
    DEFAULT_INSTANCETYPE_LABEL,
    DEFAULT_PREFERENCE_KIND_LABEL,
    DEFAULT_PREFERENCE_LABEL,
    InferFailurePolicy,
)
from virt_api.admission.snapshots import ObjectLookup

DATASOURCES = Resource("cdi.kubevirt.io", "v1beta1", "datasources", "DataSource")
_LABELS = {
    "instancetype": (DEFAULT_INSTANCETYPE_LABEL, DEFAULT_INSTANCETYPE_KIND_LABEL),
    "preference": (DEFAULT_PREFERENCE_LABEL, DEFAULT_PREFERENCE_KIND_LABEL),
}


class InferenceError(Exception):
    """Defaults could not be inferred; `ignorable`: the failure policy Ignore applies."""

    def __init__(self, message: str, *, ignorable: bool) -> None:
        super().__init__(message)
        self.ignorable = ignorable


def _from_labels(obj: Mapping[str, Any], labels: tuple[str, str]) -> tuple[str, str]:
    found = (obj.get("metadata") or {}).get("labels") or {}
    name = found.get(labels[0])
    if not isinstance(name, str):
        raise InferenceError(
            f"unable to find required {labels[0]} label on the volume", ignorable=True
        )
    kind = found.get(labels[1])
    return name, kind if isinstance(kind, str) else ""


class _Inferrer:
    """One VM's lookups (namespace and the objects' reader)."""

    def __init__(self, namespace: str, lookup: ObjectLookup) -> None:
        self.namespace = namespace
        self.lookup = lookup

    async def claim(
        self, name: str, namespace: str | None, labels: tuple[str, str]
    ) -> tuple[str, str]:
        ns = namespace or self.namespace
        pvc = await self.lookup(PVCS, ns, name)
        if pvc is None:
            raise InferenceError(f'persistentvolumeclaims "{name}" not found', ignorable=False)
        return _from_labels(pvc, labels)

    async def datasource(self, ref: Mapping[str, Any], labels: tuple[str, str]) -> tuple[str, str]:
        name, ns = str(ref.get("name") or ""), ref.get("namespace") or self.namespace
        source = await self.lookup(DATASOURCES, ns, name)
        if source is None:
            raise InferenceError(f'datasources.cdi.kubevirt.io "{name}" not found', ignorable=False)
        try:
            return _from_labels(source, labels)
        except InferenceError:
            pvc = ((source.get("spec") or {}).get("source") or {}).get("pvc")
            if not isinstance(pvc, Mapping):
                message = (
                    "unable to infer defaults from DataSource that doesn't provide "
                    "DataVolumeSourcePVC"
                )
                raise InferenceError(message, ignorable=True) from None
            return await self.claim(str(pvc.get("name") or ""), pvc.get("namespace"), labels)

    async def dv_spec(self, spec: Mapping[str, Any], labels: tuple[str, str]) -> tuple[str, str]:
        pvc = (spec.get("source") or {}).get("pvc")
        if isinstance(pvc, Mapping):
            return await self.claim(str(pvc.get("name") or ""), pvc.get("namespace"), labels)
        ref = spec.get("sourceRef")
        if isinstance(ref, Mapping):
            if ref.get("kind") == "DataSource":
                return await self.datasource(ref, labels)
            kind = ref.get("kind")
            message = (
                f"unable to infer defaults from DataVolumeSourceRef as Kind {kind} is not supported"
            )
            raise InferenceError(message, ignorable=True)
        message = (
            "unable to infer defaults from DataVolumeSpec as DataVolumeSource is not supported"
        )
        raise InferenceError(message, ignorable=True)

    async def datavolume(
        self, vm_spec: Mapping[str, Any], name: str, labels: tuple[str, str]
    ) -> tuple[str, str]:
        for template in vm_spec.get("dataVolumeTemplates") or ():
            if (
                isinstance(template, Mapping)
                and (template.get("metadata") or {}).get("name") == name
            ):
                return await self.dv_spec(template.get("spec") or {}, labels)
        dv = await self.lookup(DATAVOLUMES, self.namespace, name)
        if dv is None:  # garbage collected: its claim has its name
            return await self.claim(name, None, labels)
        try:
            return _from_labels(dv, labels)
        except InferenceError:
            return await self.dv_spec(dv.get("spec") or {}, labels)

    async def volume(
        self, vm_spec: Mapping[str, Any], volume: str, labels: tuple[str, str]
    ) -> tuple[str, str]:
        template = ((vm_spec.get("template") or {}).get("spec")) or {}
        for item in template.get("volumes") or ():
            if not isinstance(item, Mapping) or item.get("name") != volume:
                continue
            if isinstance(item.get("persistentVolumeClaim"), Mapping):
                return await self.claim(
                    str(item["persistentVolumeClaim"].get("claimName") or ""), None, labels
                )
            if isinstance(item.get("dataVolume"), Mapping):
                return await self.datavolume(
                    vm_spec, str(item["dataVolume"].get("name") or ""), labels
                )
            message = f"unable to infer defaults from volume {volume} as type is not supported"
            raise InferenceError(message, ignorable=True)
        raise InferenceError(f"unable to find volume {volume} to infer defaults", ignorable=False)


async def infer(
    spec: Mapping[str, Any], *, namespace: str, lookup: ObjectLookup
) -> tuple[dict[str, Any], list[FieldError]]:
    """The VM spec with inferFromVolume matchers resolved, and the refusals."""
    out: dict[str, Any] = copy_json(spec)
    errors: list[FieldError] = []
    inferrer = _Inferrer(namespace, lookup)
    for key, labels in _LABELS.items():
        matcher = out.get(key)
        if not isinstance(matcher, dict) or not matcher.get("inferFromVolume"):
            continue
        ignore = matcher.get("inferFromVolumeFailurePolicy") == InferFailurePolicy.IGNORE
        try:
            name, kind = await inferrer.volume(out, str(matcher["inferFromVolume"]), labels)
        except InferenceError as e:
            if e.ignorable and ignore:
                del out[key]
                continue
            errors.append(FieldError(path=f"spec.{key}.inferFromVolume", message=str(e)))
            continue
        if ignore and key == "instancetype":
            domain = ((out.get("template") or {}).get("spec") or {}).get("domain")
            if isinstance(domain, dict):
                domain.pop("memory", None)  # KubeVirt's: the fallback memory yields
        out[key] = {"name": name, **({"kind": kind} if kind else {})}
    return out, errors
