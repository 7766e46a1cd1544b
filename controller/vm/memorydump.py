"""A VM's memory dump request, the VM controller's half (pure; KubeVirt's phases).

virt-api puts status.memoryDumpRequest {claimName, phase: Associating} (or, asked to
remove it, Dissociating + remove); from there:

    Associating  → the running VMI gets the memoryDump volume (named after the claim,
                   hotpluggable: an attachment pod mounts it, the handler dumps into it)
                   → InProgress once the VMI has it
    InProgress   → the volume's MemoryDumpCompleted → Unmounting (fileName, times);
                   MemoryDumpFailed → Failed (the handler's message); the VMI gone → Failed
    Unmounting   → the claim annotated kubevirt.io/memory-dump=<fileName>, the volume
                   removed from the VMI → Completed once the handler let go of it
    Failed       → the claim annotated "Memory dump failed", the volume removed
    Dissociating → the volume removed → the request dropped

Unlike KubeVirt the volume is never written into the VM's template: the association
lives in the request alone, so a restarted VM never starts with the claim attached.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from shared.model import VirtualMachine, VirtualMachineInstance, VMIPhase
from shared.model.memorydump import (
    FAILED_ANNOTATION,
    MemoryDumpPhase,
    MemoryDumpRequest,
)
from shared.model.volumestatus import VolumePhase

# Phases in which the VMI should hold the memoryDump volume.
HOLDING = frozenset({MemoryDumpPhase.ASSOCIATING, MemoryDumpPhase.IN_PROGRESS})


def _running(vmi: VirtualMachineInstance | None) -> bool:
    return vmi is not None and vmi.status.phase is VMIPhase.RUNNING and not vmi.metadata.is_deleting


def dump_volume(claim: str) -> dict[str, Any]:
    """The VMI's memoryDump volume for `claim` (named after it, as KubeVirt's)."""
    return {"name": claim, "memoryDump": {"claimName": claim, "hotpluggable": True}}


def vmi_ops(vm: VirtualMachine, vmi: VirtualMachineInstance | None) -> list[dict[str, Any]]:
    """The JSON patch adding the memoryDump volume to the running VMI, or removing it once
    the dump ended or the association is removed ([]: nothing to do)."""
    request = vm.status.memory_dump_request
    if request is None or not request.claim_name or vmi is None or vmi.metadata.is_deleting:
        return []
    claim = request.claim_name
    volumes = [v.to_dict() for v in vmi.spec.volumes]
    present = any(v.get("name") == claim for v in volumes)
    if request.phase in HOLDING and not request.remove:
        if present or not _running(vmi):
            return []
        new = [*volumes, dump_volume(claim)]
    elif present:
        new = [v for v in volumes if v.get("name") != claim]
    else:
        return []
    return [
        {"op": "test", "path": "/spec/volumes", "value": volumes},
        {"op": "replace" if volumes else "add", "path": "/spec/volumes", "value": new},
    ]


def next_request(
    vm: VirtualMachine, vmi: VirtualMachineInstance | None
) -> MemoryDumpRequest | None:
    """status.memoryDumpRequest after this sync (None: the association is gone)."""
    request = vm.status.memory_dump_request
    if request is None:
        return None
    if request.remove and request.phase is not MemoryDumpPhase.DISSOCIATING:
        request = dataclasses.replace(request, phase=MemoryDumpPhase.DISSOCIATING)
    claim = request.claim_name or ""
    in_spec = vmi is not None and vmi.spec.volume(claim) is not None
    entry = vmi.status.volume_state(claim) if vmi is not None else None
    match request.phase:
        case MemoryDumpPhase.ASSOCIATING if in_spec:
            return dataclasses.replace(request, phase=MemoryDumpPhase.IN_PROGRESS)
        case MemoryDumpPhase.IN_PROGRESS:
            return _in_progress(request, vmi)
        case MemoryDumpPhase.UNMOUNTING if entry is None and not in_spec:
            return dataclasses.replace(request, phase=MemoryDumpPhase.COMPLETED)
        case MemoryDumpPhase.DISSOCIATING if entry is None and not in_spec:
            return None
    return request


def _in_progress(
    request: MemoryDumpRequest, vmi: VirtualMachineInstance | None
) -> MemoryDumpRequest:
    if not _running(vmi):
        return dataclasses.replace(
            request,
            phase=MemoryDumpPhase.FAILED,
            message="the VMI stopped before the memory dump completed",
        )
    assert vmi is not None
    entry = vmi.status.volume_state(request.claim_name or "")
    info = entry.memory_dump_volume if entry is not None else None
    if entry is None or info is None:
        return request
    if info.start_timestamp:
        request = dataclasses.replace(request, start_timestamp=info.start_timestamp)
    if entry.phase is VolumePhase.MEMORY_DUMP_COMPLETED:
        return dataclasses.replace(
            request,
            phase=MemoryDumpPhase.UNMOUNTING,
            end_timestamp=info.end_timestamp,
            file_name=info.target_file_name,
        )
    if entry.phase is VolumePhase.MEMORY_DUMP_FAILED:
        return dataclasses.replace(
            request,
            phase=MemoryDumpPhase.FAILED,
            message=entry.message,
            end_timestamp=info.end_timestamp,
        )
    return request


def claim_annotation(vm: VirtualMachine) -> str | None:
    """The claim's kubevirt.io/memory-dump annotation this request wants (None: none yet)."""
    request = vm.status.memory_dump_request
    if request is None:
        return None
    if request.phase in (MemoryDumpPhase.UNMOUNTING, MemoryDumpPhase.COMPLETED):
        return request.file_name
    if request.phase is MemoryDumpPhase.FAILED:
        return FAILED_ANNOTATION
    return None
