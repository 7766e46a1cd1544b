"""Features behind a KubeVirt feature gate, refused at admission while the gate is off
(read live from the cluster's KubeVirt CR), as KubeVirt's admitters refuse them.

Today one: hook sidecars (`hooks.kubevirt.io/hookSidecars`, gate `Sidecar`). kubevirt-py
runs no sidecars, so with the gate on the annotation is refused as unsupported instead of
being silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.clusterconfig import SIDECAR_GATE, ClusterConfig
from shared.model import FieldError, VirtualMachine, VirtualMachineInstance

HOOK_SIDECARS_ANNOTATION = "hooks.kubevirt.io/hookSidecars"


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
    """What `obj` (a VM or VMI wire dict) uses that its feature gate does not allow."""
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
