"""Per model class, the keys KubeVirt's kubevirt.io/v1 (and instancetype.kubevirt.io
v1beta1) API has at that place which kubevirt-py's model does not type: the table
shared.model.unsupported walks to tell "not supported by kubevirt-py" from an unknown field.
"""

from __future__ import annotations

from collections.abc import Mapping

from shared.model._codec import Model
from shared.model.credentials import CREDENTIAL_MODELS
from shared.model.devopts import (
    BlockSize,
    CustomBlockSize,
    DHCPOptions,
    DHCPPrivateOption,
    IOThreads,
    MatchVolume,
)
from shared.model.domain import (
    CPU,
    TPM,
    CDRomTarget,
    CPUFeature,
    Devices,
    Disk,
    DiskTarget,
    DomainSpec,
    Features,
    FeatureState,
    Interface,
    InterfaceBridge,
    InterfaceMasquerade,
    InterfacePasstBinding,
    InterfacePort,
    LunTarget,
    Machine,
    Memory,
    PluginBinding,
    ResourceList,
    ResourceRequirements,
    Rng,
)
from shared.model.downwardmetrics import DownwardMetricsDevice
from shared.model.features import (
    FeatureAPIC,
    FeatureHyperv,
    FeatureKVM,
    FeatureSpinlocks,
    FeatureToggle,
    FeatureVendorID,
    HyperVPassthrough,
    SyNICTimer,
    TLBFlush,
)
from shared.model.filesystems import Filesystem, FilesystemVirtiofs
from shared.model.firmware import (
    ACPI,
    BIOS,
    EFI,
    Bootloader,
    Firmware,
    KernelBoot,
    KernelBootContainer,
)
from shared.model.guestdevices import (
    Chassis,
    Clock,
    ClockOffsetUTC,
    HPETTimer,
    HypervTimer,
    I6300ESBWatchdog,
    Input,
    KVMTimer,
    PanicDevice,
    PITTimer,
    RTCTimer,
    SoundDevice,
    Timer,
    VideoDevice,
    Watchdog,
)
from shared.model.instancetype import (
    CPUInstancetype,
    InstancetypeMatcher,
    InstancetypeSpec,
    MemoryInstancetype,
)
from shared.model.migration import (
    MigrationReceive,
    MigrationSendTo,
    MigrationSpec,
)
from shared.model.noderes import NUMA, Hugepages, NUMAGuestMappingPassthrough, Realtime
from shared.model.pool import (
    Autohealing,
    NameGeneration,
    NodeSelectorRequirement,
    OpportunisticScaleIn,
    PoolSelectors,
    PoolSpec,
    Proactive,
    ProactiveScaleIn,
    ScaleInStrategy,
    SelectionPolicy,
    Strategy,
    Unmanaged,
    VMTemplateSpec,
)
from shared.model.preference import PREFERENCE_CLASSES
from shared.model.probes import (
    ExecAction,
    GuestAgentPing,
    HTTPGetAction,
    HTTPHeader,
    Probe,
    TCPSocketAction,
)
from shared.model.replicaset import ReplicaSetSpec
from shared.model.scheduling import (
    PodDNSConfig,
    PodDNSConfigOption,
    Toleration,
)
from shared.model.selector import LabelSelector, LabelSelectorRequirement
from shared.model.vm import VMITemplateSpec, VMSpec
from shared.model.vmi import VMISpec
from shared.model.volumes import (
    CloudInitConfigDriveSource,
    CloudInitNoCloudSource,
    ConfigMapSource,
    ContainerDiskSource,
    DataVolumeVolumeSource,
    DownwardAPISource,
    DownwardAPIVolumeFile,
    DownwardMetricsVolumeSource,
    EmptyDiskSource,
    EphemeralSource,
    HostDiskSource,
    LocalObjectReference,
    MemoryDumpVolumeSource,
    MultusNetwork,
    Network,
    ObjectFieldSelector,
    PersistentVolumeClaimSource,
    PodNetwork,
    ResourceFieldSelector,
    SecretSource,
    ServiceAccountSource,
    SysprepSource,
    Volume,
)

# A class whose every untyped key is a KubeVirt field (Kubernetes resource names).
ANY_KEY = "*"

# Per model class: the keys KubeVirt's kubevirt.io/v1 API has at that place which the
# model does not type. Every model class reachable from a spec has an entry.
KUBEVIRT_ONLY: Mapping[type[Model], frozenset[str]] = {
    **dict.fromkeys(CREDENTIAL_MODELS, frozenset()),  # spec.accessCredentials: all typed
    VMISpec: frozenset(
        {
            "architecture", "resourceClaims",
        }
    ),
    DomainSpec: frozenset({"launchSecurity"}),
    Chassis: frozenset(),
    Features: frozenset(),
    FeatureState: frozenset(),
    FeatureAPIC: frozenset(),
    FeatureHyperv: frozenset(),
    FeatureSpinlocks: frozenset(),
    FeatureVendorID: frozenset(),
    FeatureToggle: frozenset(),
    SyNICTimer: frozenset(),
    TLBFlush: frozenset(),
    FeatureKVM: frozenset(),
    HyperVPassthrough: frozenset(),
    Clock: frozenset(),
    ClockOffsetUTC: frozenset(),
    Timer: frozenset(),
    HPETTimer: frozenset(),
    PITTimer: frozenset(),
    RTCTimer: frozenset(),
    KVMTimer: frozenset(),
    HypervTimer: frozenset(),
    Input: frozenset(),
    Watchdog: frozenset({"diag288"}),  # s390x's
    I6300ESBWatchdog: frozenset(),
    PanicDevice: frozenset(),
    VideoDevice: frozenset(),
    DownwardMetricsDevice: frozenset(),
    Filesystem: frozenset(),
    FilesystemVirtiofs: frozenset(),
    SoundDevice: frozenset(),
    CPU: frozenset(),
    CPUFeature: frozenset(),
    Memory: frozenset(),
    NUMA: frozenset(),
    NUMAGuestMappingPassthrough: frozenset(),
    Realtime: frozenset(),
    Hugepages: frozenset(),
    ResourceRequirements: frozenset(),
    ResourceList: frozenset({ANY_KEY}),  # GPUs, hugepages, ephemeral-storage, …
    Devices: frozenset(
        {
            "autoattachPodInterface", "autoattachGraphicsDevice",
            "gpus",
            "hostDevices", "clientPassthrough",
        }
    ),
    Disk: frozenset(),
    LunTarget: frozenset({"reservation"}),  # persistent reservations (a pr-helper)
    DiskTarget: frozenset(),
    CDRomTarget: frozenset(),
    Interface: frozenset({"slirp", "sriov", "macvtap", "passt"}),
    InterfaceMasquerade: frozenset(),
    InterfaceBridge: frozenset(),
    InterfacePasstBinding: frozenset(),
    PluginBinding: frozenset(),
    Rng: frozenset(),
    BlockSize: frozenset(),
    CustomBlockSize: frozenset(),
    MatchVolume: frozenset(),
    IOThreads: frozenset(),
    DHCPOptions: frozenset(),
    DHCPPrivateOption: frozenset(),
    TPM: frozenset(),
    Firmware: frozenset(),
    ACPI: frozenset(),
    Bootloader: frozenset(),
    BIOS: frozenset(),
    EFI: frozenset(),
    InterfacePort: frozenset(),
    KernelBoot: frozenset(),
    KernelBootContainer: frozenset(),
    Machine: frozenset(),
    Volume: frozenset(),
    EphemeralSource: frozenset(),
    SysprepSource: frozenset(),
    DownwardMetricsVolumeSource: frozenset(),
    MemoryDumpVolumeSource: frozenset(),
    ContainerDiskSource: frozenset(),
    PersistentVolumeClaimSource: frozenset(),
    DataVolumeVolumeSource: frozenset(),
    HostDiskSource: frozenset(),
    EmptyDiskSource: frozenset(),
    CloudInitNoCloudSource: frozenset(),
    CloudInitConfigDriveSource: frozenset(),
    LocalObjectReference: frozenset(),
    ConfigMapSource: frozenset(),
    SecretSource: frozenset(),
    ServiceAccountSource: frozenset(),
    DownwardAPISource: frozenset(),
    DownwardAPIVolumeFile: frozenset(),
    ObjectFieldSelector: frozenset(),
    ResourceFieldSelector: frozenset(),
    Network: frozenset(),
    MultusNetwork: frozenset(),
    PodNetwork: frozenset(),
    VMSpec: frozenset(),
    VMITemplateSpec: frozenset(),
    Probe: frozenset(),
    HTTPGetAction: frozenset(),
    HTTPHeader: frozenset(),
    TCPSocketAction: frozenset(),
    ExecAction: frozenset(),
    GuestAgentPing: frozenset(),
    ReplicaSetSpec: frozenset(),
    LabelSelector: frozenset(),
    LabelSelectorRequirement: frozenset(),
    PoolSpec: frozenset(),
    VMTemplateSpec: frozenset(),
    NameGeneration: frozenset(),
    Strategy: frozenset(),
    Proactive: frozenset(),
    Unmanaged: frozenset(),
    ScaleInStrategy: frozenset(),
    ProactiveScaleIn: frozenset(),
    OpportunisticScaleIn: frozenset(),
    SelectionPolicy: frozenset(),
    PoolSelectors: frozenset(),
    NodeSelectorRequirement: frozenset(),
    Autohealing: frozenset(),
    InstancetypeMatcher: frozenset(),
    MigrationSpec: frozenset(),
    MigrationSendTo: frozenset(),
    MigrationReceive: frozenset(),
    Toleration: frozenset(),
    PodDNSConfig: frozenset(),
    PodDNSConfigOption: frozenset(),
    # instancetype.kubevirt.io/v1beta1: every field typed (a VM applying one whose VMI
    # field is refused is refused at VM admission, naming it: shared.instancetypes)
    InstancetypeSpec: frozenset(),
    CPUInstancetype: frozenset(),
    MemoryInstancetype: frozenset(),
    **{cls: frozenset() for cls in PREFERENCE_CLASSES},
}  # fmt: skip
