"""The typed kubevirt.io/v1 model: parsed from and rendered to Kubernetes wire dicts.

Raw dicts stop at the edges: `X.from_dict(d)` on the way in, `x.to_dict()` on the way
out, and `X.from_dict(d).to_dict() == d` for every well-typed `d`, unknown keys included.

Each submodule loads on first use of one of its names (PEP 562): a process that needs only
the VMI (the launcher) does not pay for building the VM, pool, instance type or KubeVirt
CR dataclasses at start-up (issue 39). Type checkers see the plain imports below.
"""

import importlib
from typing import TYPE_CHECKING, Any

from shared.apigroup import API_VERSION, GROUP, VERSION

if TYPE_CHECKING:
    from shared.model._codec import Model
    from shared.model.domain import (
        CPU,
        CDRomTarget,
        Devices,
        Disk,
        DiskTarget,
        DomainSpec,
        Interface,
        InterfaceBridge,
        InterfaceMasquerade,
        InterfacePasstBinding,
        InterfacePort,
        Machine,
        Memory,
        ResourceList,
        ResourceRequirements,
    )
    from shared.model.enums import (
        ConditionReason,
        ConditionStatus,
        EvictionStrategy,
        HostDiskType,
        MigrationAbortStatus,
        MigrationMethod,
        MigrationMode,
        MigrationPhase,
        PrintableStatus,
        PullPolicy,
        QOSClass,
        RunStrategy,
        StartStrategy,
        StateChangeAction,
        VMConditionType,
        VMIConditionType,
        VMIPhase,
    )
    from shared.model.errors import (
        FieldError,
        InvalidMigration,
        InvalidObject,
        InvalidVM,
        InvalidVMI,
        ModelError,
        ParseError,
        QuantityError,
    )
    from shared.model.firmware import (
        Firmware,
        KernelBoot,
        KernelBootContainer,
    )
    from shared.model.kubevirt import KubeVirt
    from shared.model.meta import (
        Clock,
        ObjectMeta,
        OwnerReference,
        PhaseTransition,
        VMCondition,
        VMICondition,
        format_time,
        now_rfc3339,
        parse_time,
        utc_now,
    )
    from shared.model.migration import (
        MigrationCondition,
        MigrationSpec,
        MigrationStatus,
        VirtualMachineInstanceMigration,
    )
    from shared.model.migrationstate import MigrationSideState, MigrationState
    from shared.model.objects import KubeObject
    from shared.model.replicaset import (
        ReplicaSetCondition,
        ReplicaSetConditionType,
        ReplicaSetSpec,
        ReplicaSetStatus,
        VirtualMachineInstanceReplicaSet,
    )
    from shared.model.selector import LabelSelector, LabelSelectorRequirement, SelectorOperator
    from shared.model.vm import (
        StartFailure,
        StateChangeRequest,
        VirtualMachine,
        VMITemplateSpec,
        VMSpec,
        VMStatus,
    )
    from shared.model.vmi import (
        CPUTopology,
        GuestOSInfo,
        MemoryStatus,
        VirtualMachineInstance,
        VMIInterfaceStatus,
        VMISpec,
        VMIStatus,
    )
    from shared.model.volumes import (
        CloudInitNoCloudSource,
        ContainerDiskSource,
        EmptyDiskSource,
        HostDiskSource,
        MultusNetwork,
        Network,
        PersistentVolumeClaimSource,
        PodNetwork,
        Volume,
    )
    from shared.model.volumestatus import (
        PersistentVolumeClaimInfo,
        VolumeStatus,
    )

# The submodule of each name above, for __getattr__ (tests/unit/shared/test_model_lazy.py
# keeps the two lists equal).
_EXPORTS = {  # submodule: its names, space-separated
    "_codec": "Model",
    "domain": (
        "CPU CDRomTarget Devices Disk DiskTarget DomainSpec Interface InterfaceBridge "
        "InterfaceMasquerade InterfacePasstBinding InterfacePort Machine Memory "
        "ResourceList ResourceRequirements"
    ),
    "enums": (
        "ConditionReason ConditionStatus EvictionStrategy HostDiskType "
        "MigrationAbortStatus MigrationMethod MigrationMode MigrationPhase "
        "PrintableStatus PullPolicy QOSClass RunStrategy StartStrategy StateChangeAction "
        "VMConditionType VMIConditionType VMIPhase"
    ),
    "errors": (
        "FieldError InvalidMigration InvalidObject InvalidVM InvalidVMI ModelError "
        "ParseError QuantityError"
    ),
    "firmware": "Firmware KernelBoot KernelBootContainer",
    "kubevirt": "KubeVirt",
    "meta": (
        "Clock ObjectMeta OwnerReference PhaseTransition VMCondition VMICondition "
        "format_time now_rfc3339 parse_time utc_now"
    ),
    "migration": "MigrationCondition MigrationSpec MigrationStatus VirtualMachineInstanceMigration",
    "migrationstate": "MigrationSideState MigrationState",
    "objects": "KubeObject",
    "replicaset": (
        "ReplicaSetCondition ReplicaSetConditionType ReplicaSetSpec ReplicaSetStatus "
        "VirtualMachineInstanceReplicaSet"
    ),
    "selector": "LabelSelector LabelSelectorRequirement SelectorOperator",
    "vm": "StartFailure StateChangeRequest VirtualMachine VMITemplateSpec VMSpec VMStatus",
    "vmi": (
        "CPUTopology GuestOSInfo MemoryStatus VirtualMachineInstance VMIInterfaceStatus "
        "VMISpec VMIStatus"
    ),
    "volumes": (
        "CloudInitNoCloudSource ContainerDiskSource EmptyDiskSource HostDiskSource "
        "MultusNetwork Network PersistentVolumeClaimSource PodNetwork Volume"
    ),
    "volumestatus": "PersistentVolumeClaimInfo VolumeStatus",
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names.split()}


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """Load the submodule that defines ``name`` and keep the name here."""
        module = _MODULE_OF.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


__all__ = [
    "API_VERSION",
    "CPU",
    "GROUP",
    "VERSION",
    "CDRomTarget",
    "CPUTopology",
    "Clock",
    "CloudInitNoCloudSource",
    "ConditionReason",
    "ConditionStatus",
    "ContainerDiskSource",
    "Devices",
    "Disk",
    "DiskTarget",
    "DomainSpec",
    "EmptyDiskSource",
    "EvictionStrategy",
    "FieldError",
    "Firmware",
    "GuestOSInfo",
    "HostDiskSource",
    "HostDiskType",
    "Interface",
    "InterfaceBridge",
    "InterfaceMasquerade",
    "InterfacePasstBinding",
    "InterfacePort",
    "InvalidMigration",
    "InvalidObject",
    "InvalidVM",
    "InvalidVMI",
    "KernelBoot",
    "KernelBootContainer",
    "KubeObject",
    "KubeVirt",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Machine",
    "Memory",
    "MemoryStatus",
    "MigrationAbortStatus",
    "MigrationCondition",
    "MigrationMethod",
    "MigrationMode",
    "MigrationPhase",
    "MigrationSideState",
    "MigrationSpec",
    "MigrationState",
    "MigrationStatus",
    "Model",
    "ModelError",
    "MultusNetwork",
    "Network",
    "ObjectMeta",
    "OwnerReference",
    "ParseError",
    "PersistentVolumeClaimInfo",
    "PersistentVolumeClaimSource",
    "PhaseTransition",
    "PodNetwork",
    "PrintableStatus",
    "PullPolicy",
    "QOSClass",
    "QuantityError",
    "ReplicaSetCondition",
    "ReplicaSetConditionType",
    "ReplicaSetSpec",
    "ReplicaSetStatus",
    "ResourceList",
    "ResourceRequirements",
    "RunStrategy",
    "SelectorOperator",
    "StartFailure",
    "StartStrategy",
    "StateChangeAction",
    "StateChangeRequest",
    "VMCondition",
    "VMConditionType",
    "VMICondition",
    "VMIConditionType",
    "VMIInterfaceStatus",
    "VMIPhase",
    "VMISpec",
    "VMIStatus",
    "VMITemplateSpec",
    "VMSpec",
    "VMStatus",
    "VirtualMachine",
    "VirtualMachineInstance",
    "VirtualMachineInstanceMigration",
    "VirtualMachineInstanceReplicaSet",
    "Volume",
    "VolumeStatus",
    "format_time",
    "now_rfc3339",
    "parse_time",
    "utc_now",
]
