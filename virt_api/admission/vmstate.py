"""Persistent TPM / EFI state needs a class for its claim: refused at admission, naming the
field, while the KubeVirt CR's spec.configuration.vmStateStorageClass is unset.

KubeVirt falls back to the cluster's default storage class (and RWO, which makes the VM
not live-migratable); kubevirt-py asks the administrator to name the class instead, so a
VM's TPM state never lands silently on storage nobody chose for it (docs/features.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared import vmstate
from shared.clusterconfig import ClusterConfig
from shared.model import FieldError, VirtualMachine, VirtualMachineInstance


def _get(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _vmi_spec(kind: str, obj: Mapping[str, Any]) -> tuple[str, Any]:
    if kind == VirtualMachine.KIND:
        return "spec.template.spec", _get(obj, "spec", "template", "spec")
    if kind == VirtualMachineInstance.KIND:
        return "spec", _get(obj, "spec")
    return "", None


def requested(kind: str, obj: Mapping[str, Any]) -> list[str]:
    """The paths of the persistent fields a VM or VMI wire dict sets true."""
    prefix, spec = _vmi_spec(kind, obj)
    tpm = _get(spec, "domain", "devices", "tpm")
    found = []
    if _get(tpm, "persistent") is True and _get(tpm, "enabled") is not False:
        found.append(f"{prefix}.{vmstate.TPM_FIELD}")
    if _get(spec, "domain", "firmware", "bootloader", "efi", "persistent") is True:
        found.append(f"{prefix}.{vmstate.EFI_FIELD}")
    return found


def state_errors(kind: str, obj: Mapping[str, Any], config: ClusterConfig) -> list[FieldError]:
    """A persistent field set while the KubeVirt CR names no class for the state claim."""
    if config.vm_state_storage_class:
        return []
    message = (
        f"persistent state needs a storage class: the KubeVirt CR's {vmstate.CLASS_FIELD} "
        "is not set"
    )
    return [FieldError(path=p, message=message, value=True) for p in requested(kind, obj)]
