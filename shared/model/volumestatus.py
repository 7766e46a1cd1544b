"""VMI status.volumeStatus: how far each hotplugged volume got (KubeVirt's phases).

The controller writes Pending (claim not bound), Bound and AttachedToNode (its attachment
pod runs on the VMI's node), with the pod in `hotplugVolume`; the handler writes
MountedToPod (the claim's disk is reachable in the launcher pod) and Ready (attached to
the guest, `target` its device), and drops the entry once a removed volume is detached.
Detaching is the controller's mark on a removed volume the handler still holds.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.model._codec import Model, json_name


class VolumePhase(enum.StrEnum):
    """volumeStatus[].phase (KubeVirt's VolumePhase)."""

    PENDING = "Pending"
    BOUND = "Bound"
    ATTACHED_TO_NODE = "AttachedToNode"
    MOUNTED_TO_POD = "MountedToPod"
    READY = "Ready"
    DETACHING = "Detaching"
    MEMORY_DUMP_IN_PROGRESS = "MemoryDumpInProgress"
    MEMORY_DUMP_COMPLETED = "MemoryDumpCompleted"
    MEMORY_DUMP_FAILED = "MemoryDumpFailed"

    @property
    def mounted(self) -> bool:
        """The handler may hold a mount (or a guest device) for a volume in this phase."""
        return self in (
            VolumePhase.MOUNTED_TO_POD,
            VolumePhase.READY,
            VolumePhase.DETACHING,
            *MEMORY_DUMP_PHASES,
        )


# A memory dump volume's handler phases (its claim is mounted into the launcher).
MEMORY_DUMP_PHASES = frozenset(
    {
        VolumePhase.MEMORY_DUMP_IN_PROGRESS,
        VolumePhase.MEMORY_DUMP_COMPLETED,
        VolumePhase.MEMORY_DUMP_FAILED,
    }
)


class VolumeReason(enum.StrEnum):
    """volumeStatus[].reason values (KubeVirt's, plus the detach outcomes)."""

    PVC_NOT_READY = "PVCNotReady"
    SUCCESSFUL_CREATE = "SuccessfulCreate"
    FAILED_CREATE = "FailedCreate"
    MOUNTED_TO_POD = "VolumeMountedToPod"
    MOUNT_FAILED = "VolumeMountFailed"
    READY = "VolumeReady"
    ATTACH_FAILED = "VolumeAttachFailed"
    DETACHING = "VolumeDetaching"


@dataclass(frozen=True, slots=True, kw_only=True)
class HotplugVolumeStatus(Model):
    """volumeStatus[].hotplugVolume: the attachment pod that mounts the claim on the node."""

    attach_pod_name: str | None = None
    attach_pod_uid: str | None = field(default=None, metadata=json_name("attachPodUID"))


# A claim whose volume every node can mount read-write (shared storage): what makes a VMI
# on it live-migratable without copying the disk.
SHARED_ACCESS_MODE = "ReadWriteMany"


@dataclass(frozen=True, slots=True, kw_only=True)
class PersistentVolumeClaimInfo(Model):
    """volumeStatus[].persistentVolumeClaimInfo: what the claim offers, as bound
    (access_modes are the bound volume's: the claim's status.accessModes)."""

    claim_name: str | None = None
    access_modes: tuple[str, ...] = ()
    volume_mode: str | None = None
    capacity: Mapping[str, str] = field(default_factory=dict)
    requests: Mapping[str, str] = field(default_factory=dict)

    @property
    def shared(self) -> bool:
        """ReadWriteMany: every node may mount it read-write."""
        return SHARED_ACCESS_MODE in self.access_modes


@dataclass(frozen=True, slots=True, kw_only=True)
class DomainMemoryDumpInfo(Model):
    """volumeStatus[].memoryDumpVolume: the dump's file on the claim and its times."""

    start_timestamp: str | None = None
    end_timestamp: str | None = None
    claim_name: str | None = None
    target_file_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeStatus(Model):
    """One entry of status.volumeStatus."""

    name: str | None = None
    target: str | None = None
    phase: VolumePhase | None = None
    reason: str | None = None
    message: str | None = None
    hotplug_volume: HotplugVolumeStatus | None = None
    persistent_volume_claim_info: PersistentVolumeClaimInfo | None = None
    memory_dump_volume: DomainMemoryDumpInfo | None = None

    @property
    def attach_pod_uid(self) -> str | None:
        return self.hotplug_volume.attach_pod_uid if self.hotplug_volume else None
