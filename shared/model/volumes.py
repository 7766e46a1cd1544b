"""spec.volumes and spec.networks of a VirtualMachineInstance.

Volumes pair with disks and networks with interfaces by name, as in KubeVirt. Sources
the model does not type (dataVolume, ephemeral, …) stay in `extra` and are still counted
by `Volume.sources()` so validation can insist on exactly one.

configMap, secret, serviceAccount and downwardAPI are config volumes: the pod mounts the
object, the launcher hands its files to the guest as an ISO disk (KubeVirt's behaviour);
sysprep is one too (a ConfigMap's or Secret's autounattend.xml/unattend.xml on a CD-ROM
labelled `unattendCD`). `ephemeral` is a claim the guest never writes: the read-only
backing file of a qcow2 overlay in the pod's scratch, gone with the pod (KubeVirt's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from shared.model._codec import Model, json_name
from shared.model.enums import HostDiskType, PullPolicy

# Volume sources KubeVirt knows that the model keeps untyped in `extra`.
UNTYPED_VOLUME_SOURCES: tuple[str, ...] = ()
# Buses a disk may be hotplugged on (KubeVirt's rule), and virtctl's default.
HOTPLUG_BUSES = ("scsi", "virtio")
DEFAULT_HOTPLUG_BUS = "scsi"
# Network sources the model keeps untyped.
UNTYPED_NETWORK_SOURCES: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerDiskSource(Model):
    """volumes[].containerDisk: a disk image shipped in a container image."""

    image: str | None = None
    path: str | None = None
    image_pull_policy: PullPolicy | None = None
    image_pull_secret: str | None = None  # a Secret the launcher pod pulls the image with


@dataclass(frozen=True, slots=True, kw_only=True)
class PersistentVolumeClaimSource(Model):
    """volumes[].persistentVolumeClaim."""

    claim_name: str | None = None
    read_only: bool | None = None
    hotpluggable: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DataVolumeVolumeSource(Model):
    """volumes[].dataVolume: the claim a DataVolume of this name made (same name, as in
    KubeVirt); every daemon handles it as that persistentVolumeClaim (`Volume.claim`)."""

    name: str | None = None
    hotpluggable: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryDumpVolumeSource(Model):
    """volumes[].memoryDump: a claim the VM controller hot-plugs into the launcher (no
    disk) for a memory dump (KubeVirt's memory-dump subresource; the volume is the
    claim's name); the guest never sees it."""

    claim_name: str | None = None
    read_only: bool | None = None
    hotpluggable: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HostDiskSource(Model):
    """volumes[].hostDisk: a disk image file on the node."""

    path: str | None = None
    type: HostDiskType | None = None
    capacity: str | int | None = None
    # The path is on storage every node sees: the disk stays in place across a live
    # migration (LiveMigratable), as a ReadWriteMany claim's does.
    shared: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EmptyDiskSource(Model):
    """volumes[].emptyDisk: a scratch disk created on start, gone with the VMI."""

    capacity: str | int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalObjectReference(Model):
    """A Secret named in the VMI's namespace (cloud-init's secretRef)."""

    name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CloudInitNoCloudSource(Model):
    """volumes[].cloudInitNoCloud: user data (and network data) inline, base64 or from a
    Secret (its key userdata or userData, networkdata or networkData)."""

    user_data: str | None = None
    user_data_base64: str | None = None
    user_data_secret_ref: LocalObjectReference | None = field(
        default=None, metadata=json_name("secretRef")
    )
    network_data: str | None = None
    network_data_base64: str | None = None
    network_data_secret_ref: LocalObjectReference | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CloudInitConfigDriveSource(CloudInitNoCloudSource):
    """volumes[].cloudInitConfigDrive: the same fields, as an OpenStack config drive."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigMapSource(Model):
    """volumes[].configMap: a ConfigMap's keys as files on an ISO disk."""

    name: str | None = None
    optional: bool | None = None
    volume_label: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SecretSource(Model):
    """volumes[].secret: a Secret's keys as files on an ISO disk."""

    secret_name: str | None = None
    optional: bool | None = None
    volume_label: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceAccountSource(Model):
    """volumes[].serviceAccount: the account's token, ca.crt and namespace on an ISO disk."""

    service_account_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ObjectFieldSelector(Model):
    """downwardAPI fieldRef: a field of the (launcher) pod."""

    api_version: str | None = None
    field_path: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceFieldSelector(Model):
    """downwardAPI resourceFieldRef: a resource of a container of the pod."""

    container_name: str | None = None
    resource: str | None = None
    divisor: str | int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DownwardAPIVolumeFile(Model):
    """One file of a downwardAPI volume (Kubernetes' DownwardAPIVolumeFile)."""

    path: str | None = None
    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None
    mode: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DownwardAPISource(Model):
    """volumes[].downwardAPI: pod fields (labels, annotations, …) as files on an ISO disk."""

    fields: tuple[DownwardAPIVolumeFile, ...] = ()
    volume_label: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EphemeralSource(Model):
    """volumes[].ephemeral: the claim (never written) under a per-pod qcow2 overlay."""

    persistent_volume_claim: PersistentVolumeClaimSource | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SysprepSource(Model):
    """volumes[].sysprep: exactly one of a ConfigMap or a Secret holding the answer file."""

    config_map: LocalObjectReference | None = None
    secret: LocalObjectReference | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DownwardMetricsVolumeSource(Model):
    """volumes[].downwardMetrics: `{}`, a vhostmd disk the handler keeps filled."""


# Config volumes: an object the pod mounts, handed to the guest as an ISO.
ConfigSource: TypeAlias = ConfigMapSource | SecretSource | ServiceAccountSource | DownwardAPISource

# The typed volume sources; each daemon keys its per-source module table by these types.
VolumeSource: TypeAlias = (
    ContainerDiskSource
    | PersistentVolumeClaimSource
    | HostDiskSource
    | EmptyDiskSource
    | CloudInitNoCloudSource
    | CloudInitConfigDriveSource
    | ConfigSource
    | EphemeralSource
    | SysprepSource
    | DownwardMetricsVolumeSource
    | MemoryDumpVolumeSource
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Volume(Model):
    """spec.volumes[]: exactly one source per volume."""

    name: str | None = None
    container_disk: ContainerDiskSource | None = None
    persistent_volume_claim: PersistentVolumeClaimSource | None = None
    data_volume: DataVolumeVolumeSource | None = None
    host_disk: HostDiskSource | None = None
    empty_disk: EmptyDiskSource | None = None
    cloud_init_no_cloud: CloudInitNoCloudSource | None = None
    cloud_init_config_drive: CloudInitConfigDriveSource | None = None
    config_map: ConfigMapSource | None = None
    secret: SecretSource | None = None
    service_account: ServiceAccountSource | None = None
    downward_api: DownwardAPISource | None = field(default=None, metadata=json_name("downwardAPI"))
    ephemeral: EphemeralSource | None = None
    sysprep: SysprepSource | None = None
    downward_metrics: DownwardMetricsVolumeSource | None = None
    memory_dump: MemoryDumpVolumeSource | None = None

    def source(self) -> VolumeSource | None:
        """The typed source set on this volume (the first one, should there be several:
        validation refuses that). Daemons pick their handling of a volume by its type."""
        for _, value in self._typed():
            if value is not None:
                return value
        return None

    def _typed(self) -> tuple[tuple[str, VolumeSource | None], ...]:
        return (
            ("containerDisk", self.container_disk),
            ("persistentVolumeClaim", self.claim),
            ("hostDisk", self.host_disk),
            ("emptyDisk", self.empty_disk),
            ("cloudInitNoCloud", self.cloud_init_no_cloud),
            ("cloudInitConfigDrive", self.cloud_init_config_drive),
            ("configMap", self.config_map),
            ("secret", self.secret),
            ("serviceAccount", self.service_account),
            ("downwardAPI", self.downward_api),
            ("ephemeral", self.ephemeral),
            ("sysprep", self.sysprep),
            ("downwardMetrics", self.downward_metrics),
            ("memoryDump", self.memory_dump),
        )

    @property
    def claim(self) -> PersistentVolumeClaimSource | None:
        """The claim this volume mounts: its persistentVolumeClaim, or the one of its
        dataVolume (the DataVolume's name is its claim's)."""
        if self.persistent_volume_claim is not None:
            return self.persistent_volume_claim
        dv = self.data_volume
        if dv is None:
            return None
        return PersistentVolumeClaimSource(claim_name=dv.name, hotpluggable=dv.hotpluggable)

    def sources(self) -> tuple[str, ...]:
        """Wire names of every source set on this volume (typed or not)."""
        found = [key for key, value in self._typed() if value is not None]
        found = [k for k in found if k != "persistentVolumeClaim"]
        found += [
            key
            for key, value in (
                ("persistentVolumeClaim", self.persistent_volume_claim),
                ("dataVolume", self.data_volume),
            )
            if value is not None
        ]
        found += [key for key in UNTYPED_VOLUME_SOURCES if self.extra.get(key) is not None]
        return tuple(found)

    @property
    def is_hotplug(self) -> bool:
        """A hotpluggable claim: attached to the running guest (or, a memory dump's, to
        its launcher), not part of its pod."""
        pvc = self.claim
        if self.memory_dump is not None:
            return bool(self.memory_dump.hotpluggable)
        return pvc is not None and bool(pvc.hotpluggable)

    @property
    def hotplug_claim(self) -> str | None:
        """The claim a hotplugged volume's attachment pod mounts (a memory dump's too)."""
        if self.memory_dump is not None:
            return self.memory_dump.claim_name
        return self.claim.claim_name if self.claim is not None else None

    @property
    def is_cloud_init(self) -> bool:
        """True for cloud-init volumes (NoCloud or ConfigDrive)."""
        return self.cloud_init_no_cloud is not None or self.cloud_init_config_drive is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class PodNetwork(Model):
    """networks[].pod: the pod's default network."""

    vm_network_cidr: str | None = field(default=None, metadata=json_name("vmNetworkCIDR"))
    # masquerade's IPv6 guest range on a dual-stack pod (KubeVirt's fd10:0:2::/120)
    vm_ipv6_network_cidr: str | None = field(default=None, metadata=json_name("vmIPv6NetworkCIDR"))


@dataclass(frozen=True, slots=True, kw_only=True)
class MultusNetwork(Model):
    """networks[].multus: a NetworkAttachmentDefinition (`name` or `namespace/name`) the
    launcher pod is attached to through the `k8s.v1.cni.cncf.io/networks` annotation."""

    network_name: str | None = None
    default: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Network(Model):
    """spec.networks[]: exactly one source (pod or multus)."""

    name: str | None = None
    pod: PodNetwork | None = None
    multus: MultusNetwork | None = None

    @property
    def primary(self) -> bool:
        """The pod's primary network: the pod network, or a multus network made the pod's
        default (`multus.default`, KubeVirt's `v1.multus-cni.io/default-network`)."""
        return self.pod is not None or (self.multus is not None and bool(self.multus.default))

    def sources(self) -> tuple[str, ...]:
        """Wire names of every network source set (typed or not)."""
        found = ["pod"] if self.pod is not None else []
        found += ["multus"] if self.multus is not None else []
        found += [key for key in UNTYPED_NETWORK_SOURCES if self.extra.get(key) is not None]
        return tuple(found)
