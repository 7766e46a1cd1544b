"""String enums of kubevirt.io/v1, named and valued as KubeVirt has them.

Closed sets (phases, strategies) are parsed strictly; open sets (condition types and
reasons, which KubeVirt keeps extending) are parsed to the enum when known and kept as
plain strings otherwise, so objects written by newer components still load.
"""

from __future__ import annotations

import enum


class VMIPhase(enum.StrEnum):
    """VirtualMachineInstance phase; "" means not yet set."""

    UNSET = ""
    PENDING = "Pending"
    # A decentralized migration's receiving VMI: no launcher pod until the guest arrives.
    # (Declared in phase order: controller/transitions.with_phases moves forward by it.)
    WAITING_FOR_SYNC = "WaitingForSync"
    SCHEDULING = "Scheduling"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    def is_final(self) -> bool:
        """Succeeded and Failed never change again."""
        return self in (VMIPhase.SUCCEEDED, VMIPhase.FAILED)


class MigrationPhase(enum.StrEnum):
    """VirtualMachineInstanceMigration phase; "" means not yet set."""

    UNSET = ""
    # KubeVirt's decentralized migration (sendTo / receive): before Pending, in this order
    # (phases only move forward in declaration order, controller/transitions.py). The
    # receiving VMIM waits for its sending half, the sending VMIM for the receiver's target.
    WAITING_FOR_SYNC = "WaitingForSync"
    SYNCHRONIZING = "Synchronizing"
    PENDING = "Pending"
    SCHEDULING = "Scheduling"
    SCHEDULED = "Scheduled"
    PREPARING_TARGET = "PreparingTarget"
    TARGET_READY = "TargetReady"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"

    def is_final(self) -> bool:
        """Succeeded and Failed never change again."""
        return self in (MigrationPhase.SUCCEEDED, MigrationPhase.FAILED)


class ConditionStatus(enum.StrEnum):
    """Kubernetes condition status."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class VMIConditionType(enum.StrEnum):
    """Condition types on a VMI (open set: unknown types load as str)."""

    PROVISIONING = "Provisioning"
    READY = "Ready"
    SYNCHRONIZED = "Synchronized"
    PAUSED = "Paused"
    AGENT_CONNECTED = "AgentConnected"
    ACCESS_CREDENTIALS_SYNCHRONIZED = "AccessCredentialsSynchronized"
    UNSUPPORTED_AGENT = "AgentVersionNotSupported"
    LIVE_MIGRATABLE = "LiveMigratable"
    HOT_VCPU_CHANGE = "HotVCPUChange"  # a live sockets change not applied yet
    HOT_MEMORY_CHANGE = "HotMemoryChange"  # a live memory raise not plugged yet
    VOLUMES_CHANGE = "VolumesChange"  # a volume migration pending (updateVolumesStrategy)
    # A receiving VMI waiting for its decentralized migration's sending side.
    DECENTRALIZED_LIVE_MIGRATION_FAILURE = "DecentralizedLiveMigrationFailure"


class VMConditionType(enum.StrEnum):
    """Condition types on a VM (open set: unknown types load as str)."""

    FAILURE = "Failure"
    READY = "Ready"
    PAUSED = "Paused"
    RESTART_REQUIRED = "RestartRequired"
    MANUAL_RECOVERY_REQUIRED = "ManualRecoveryRequired"  # a volume migration was cut short


class ConditionReason(enum.StrEnum):
    """Condition reasons KubeVirt sets (open set: unknown reasons load as str)."""

    # Ready=False
    POD_TERMINATING = "PodTerminating"
    POD_NOT_EXISTS = "PodNotExists"
    POD_CONDITION_MISSING = "PodConditionMissing"
    GUEST_NOT_RUNNING = "GuestNotRunning"
    # Paused=True
    PAUSED_BY_USER = "PausedByUser"
    PAUSED_IO_ERROR = "PausedIOError"
    # LiveMigratable=False
    DISKS_NOT_MIGRATABLE = "DisksNotLiveMigratable"
    INTERFACE_NOT_MIGRATABLE = "InterfaceNotLiveMigratable"
    HOTPLUG_NOT_MIGRATABLE = "HotplugNotLiveMigratable"
    # kubevirt-py's: the target's exclusive CPUs are not re-pinned (docs/node-resources.md)
    DEDICATED_CPUS_NOT_MIGRATABLE = "DedicatedCPUsNotLiveMigratable"
    VIRTIOFS_NOT_MIGRATABLE = "VirtIOFSNotLiveMigratable"
    # Synchronized=False / VM Failure=True (controller sync errors)
    FAILED_CREATE = "FailedCreate"
    FAILED_DELETE = "FailedDelete"
    FAILED_UPDATE = "FailedUpdate"
    FAILED_PVC_NOT_FOUND = "FailedPvcNotFound"
    FAILED_GUEST_NOT_RUNNING = "FailedGuestNotRunning"
    FAILED_MIGRATION = "FailedMigration"
    FAILED_SYNC = "SyncFailed"
    INVALID_SPEC = "InvalidSpec"
    NODE_UNRESPONSIVE = "NodeUnresponsive"
    UNSCHEDULABLE = "Unschedulable"
    # VMI status.reason of a VMI whose virt-launcher died: the handler (command socket
    # gone) and the controller (launcher pod down or gone) write the same reason.
    LAUNCHER_DIED = "LauncherDied"


class RunStrategy(enum.StrEnum):
    """VM spec.runStrategy."""

    ALWAYS = "Always"
    RERUN_ON_FAILURE = "RerunOnFailure"
    MANUAL = "Manual"
    HALTED = "Halted"
    ONCE = "Once"
    # A decentralized migration's receiving VM (KubeVirt 1.7): typed, refused at admission
    # (shared/model/unsupported.py UNSUPPORTED_VALUES), so no controller meets it.
    WAIT_AS_RECEIVER = "WaitAsReceiver"


class PrintableStatus(enum.StrEnum):
    """VM status.printableStatus (what `kubectl get vm` shows)."""

    STOPPED = "Stopped"
    PROVISIONING = "Provisioning"
    STARTING = "Starting"
    RUNNING = "Running"
    PAUSED = "Paused"
    STOPPING = "Stopping"
    TERMINATING = "Terminating"
    CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
    MIGRATING = "Migrating"
    UNKNOWN = "Unknown"
    UNSCHEDULABLE = "ErrorUnschedulable"
    ERR_IMAGE_PULL = "ErrImagePull"
    IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
    PVC_NOT_FOUND = "ErrorPvcNotFound"
    DATA_VOLUME_ERROR = "DataVolumeError"
    WAITING_FOR_VOLUME_BINDING = "WaitingForVolumeBinding"
    # A WaitAsReceiver VM whose guest has not arrived (decentralized migration).
    WAITING_FOR_RECEIVER = "WaitingForReceiver"


class StateChangeAction(enum.StrEnum):
    """VM status.stateChangeRequests[].action."""

    START = "Start"
    STOP = "Stop"


class StartStrategy(enum.StrEnum):
    """VMI spec.startStrategy."""

    PAUSED = "Paused"


class EvictionStrategy(enum.StrEnum):
    """VMI spec.evictionStrategy."""

    NONE = "None"
    LIVE_MIGRATE = "LiveMigrate"
    LIVE_MIGRATE_IF_POSSIBLE = "LiveMigrateIfPossible"
    EXTERNAL = "External"


class HostDiskType(enum.StrEnum):
    """hostDisk.type."""

    DISK = "Disk"
    DISK_OR_CREATE = "DiskOrCreate"


class PullPolicy(enum.StrEnum):
    """imagePullPolicy of containerDisk and kernelBoot.container."""

    ALWAYS = "Always"
    IF_NOT_PRESENT = "IfNotPresent"
    NEVER = "Never"


class MigrationMode(enum.StrEnum):
    """migrationState.mode."""

    PRE_COPY = "PreCopy"
    POST_COPY = "PostCopy"


class MigrationAbortStatus(enum.StrEnum):
    """migrationState.abortStatus."""

    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    ABORTING = "Aborting"


class MigrationMethod(enum.StrEnum):
    """VMI status.migrationMethod."""

    BLOCK_MIGRATION = "BlockMigration"
    LIVE_MIGRATION = "LiveMigration"


class QOSClass(enum.StrEnum):
    """VMI status.qosClass (the launcher pod's QoS class)."""

    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


class CPUFeaturePolicy(enum.StrEnum):
    """domain.cpu.features[].policy: libvirt's feature policies (unset means require)."""

    FORCE = "force"
    REQUIRE = "require"
    OPTIONAL = "optional"
    DISABLE = "disable"
    FORBID = "forbid"
