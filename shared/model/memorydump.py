"""VM status.memoryDumpRequest: KubeVirt's memory dump into a claim, as the VM tracks it.

PUT …/memorydump {claimName}   → Associating (virt-api)
the VMI gets the memoryDump volume → InProgress (VM controller)
the handler's dump Completed   → Unmounting (fileName, endTimestamp), the claim
                                 annotated, the volume removed → Completed
the dump failed                → Failed (message), the volume removed
PUT …/removememorydump         → Dissociating (remove) → the request dropped
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from shared.model._codec import Model

# The claim's annotation: the dump's file name (KubeVirt's PVCMemoryDumpAnnotation).
PVC_MEMORY_DUMP_ANNOTATION = "kubevirt.io/memory-dump"
FAILED_ANNOTATION = "Memory dump failed"
# What a dump needs beside the guest's memory (KubeVirt's CalcExpectedMemoryDumpSize), and
# the filesystem overhead a claim's size must allow (CDI's default 5.5%).
MIB = 1024 * 1024
MEMORY_DUMP_OVERHEAD = 100 * MIB
FILESYSTEM_OVERHEAD = 0.055


class MemoryDumpPhase(enum.StrEnum):
    """status.memoryDumpRequest.phase (KubeVirt's MemoryDumpPhase)."""

    ASSOCIATING = "Associating"
    IN_PROGRESS = "InProgress"
    UNMOUNTING = "Unmounting"
    COMPLETED = "Completed"
    DISSOCIATING = "Dissociating"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryDumpRequest(Model):
    """status.memoryDumpRequest (KubeVirt's VirtualMachineMemoryDumpRequest)."""

    claim_name: str | None = None
    phase: MemoryDumpPhase | None = None
    remove: bool | None = None
    start_timestamp: str | None = None
    end_timestamp: str | None = None
    file_name: str | None = None
    message: str | None = None

    @property
    def finished(self) -> bool:
        """Completed or Failed: a new dump may be asked for."""
        return self.phase in (MemoryDumpPhase.COMPLETED, MemoryDumpPhase.FAILED)


def needed_bytes(memory_bytes: int) -> int:
    """The smallest claim a dump of a guest with `memory_bytes` fits on (KubeVirt's rule:
    memory + 100 MiB, times 1 + the filesystem overhead, aligned up to 1 MiB)."""
    total = (1 + FILESYSTEM_OVERHEAD) * (memory_bytes + MEMORY_DUMP_OVERHEAD)
    return math.ceil(total / MIB) * MIB
