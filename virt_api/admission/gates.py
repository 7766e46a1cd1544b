"""Features behind a KubeVirt feature gate, refused at admission while the gate is off
(read live from the cluster's KubeVirt CR), as KubeVirt's admitters refuse them.

Hook sidecars (`hooks.kubevirt.io/hookSidecars`, gate `Sidecar`): kubevirt-py runs no
sidecars, so with the gate on the annotation is refused as unsupported instead of being
silently ignored. Decentralized live migration (a VMIM's `sendTo` / `receive`, a VM's
`runStrategy: WaitAsReceiver`; gate `DecentralizedLiveMigration`, KubeVirt's message): with
the gate on they are still refused as not supported (shared/model/unsupported.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.clusterconfig import DECENTRALIZED_MIGRATION_GATE, SIDECAR_GATE, ClusterConfig
from shared.model import (
    FieldError,
    VirtualMachine,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
)

HOOK_SIDECARS_ANNOTATION = "hooks.kubevirt.io/hookSidecars"
DECENTRALIZED_GATE_OFF = (
    f"{DECENTRALIZED_MIGRATION_GATE} feature gate is not enabled in kubevirt resource"
)
WAIT_AS_RECEIVER = "WaitAsReceiver"


def _annotations(kind: str, obj: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """The path prefix and the annotations that reach the VMI."""
    if kind == VirtualMachine.KIND:
        spec = obj.get("spec") or {}
        template = spec.get("template") or {} if isinstance(spec, Mapping) else {}
        meta = template.get("metadata") or {} if isinstance(template, Mapping) else {}
        prefix = "spec.template.metadata.annotations"
    elif kind == VirtualMachineInstance.KIND:
        meta = obj.get("metadata") or {}
        prefix = "metadata.annotations"
    else:
        return "", {}
    found = meta.get("annotations") if isinstance(meta, Mapping) else None
    return prefix, found if isinstance(found, Mapping) else {}


def gate_errors(kind: str, obj: Mapping[str, Any], config: ClusterConfig) -> list[FieldError]:
    """What `obj` (a VM, VMI or VMIM wire dict) uses that its feature gate does not allow."""
    errors = _sidecar_errors(kind, obj, config)
    if not config.gate(DECENTRALIZED_MIGRATION_GATE):
        errors += _decentralized_fields(kind, obj)
    return errors


def _decentralized_fields(kind: str, obj: Mapping[str, Any]) -> list[FieldError]:
    """The decentralized-migration fields `obj` sets, each refused for the gate."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return []
    found: list[tuple[str, Any]] = []
    if kind == VirtualMachineInstanceMigration.KIND:
        found = [(f"spec.{k}", spec[k]) for k in ("sendTo", "receive") if spec.get(k)]
    elif kind == VirtualMachine.KIND and spec.get("runStrategy") == WAIT_AS_RECEIVER:
        found = [("spec.runStrategy", WAIT_AS_RECEIVER)]
    return [FieldError(path=p, message=DECENTRALIZED_GATE_OFF, value=v) for p, v in found]


def _sidecar_errors(kind: str, obj: Mapping[str, Any], config: ClusterConfig) -> list[FieldError]:
    prefix, annotations = _annotations(kind, obj)
    if HOOK_SIDECARS_ANNOTATION not in annotations:
        return []
    path = f"{prefix}.{HOOK_SIDECARS_ANNOTATION}"
    value = annotations[HOOK_SIDECARS_ANNOTATION]
    if not config.gate(SIDECAR_GATE):
        message = f"{SIDECAR_GATE} feature gate is not enabled in the KubeVirt CR"
    else:
        message = "hook sidecars are not supported by kubevirt-py"
    return [FieldError(path=path, message=message, value=value)]
