"""spec.volumes and spec.networks of a VirtualMachineInstance.

Volumes pair with disks and networks with interfaces by name, as in KubeVirt. Sources
the model does not type (configMap, secret, dataVolume, …) stay in `extra` and are still
counted by `Volume.sources()` so validation can insist on exactly one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

from shared.model._codec import Model, json_name
from shared.model.enums import HostDiskType, PullPolicy

# Volume sources KubeVirt knows that the model keeps untyped in `extra`.
UNTYPED_VOLUME_SOURCES = (
    "cloudInitConfigDrive",
    "configMap",
    "secret",
    "serviceAccount",
    "dataVolume",
    "downwardAPI",
    "downwardMetrics",
    "ephemeral",
    "sysprep",
    "memoryDump",
)
# Network sources the model keeps untyped.
UNTYPED_NETWORK_SOURCES = ("multus",)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerDiskSource(Model):
    """volumes[].containerDisk: a disk image shipped in a container image."""

    image: str | None = None
    path: str | None = None
    image_pull_policy: PullPolicy | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PersistentVolumeClaimSource(Model):
    """volumes[].persistentVolumeClaim."""

    claim_name: str | None = None
    read_only: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HostDiskSource(Model):
    """volumes[].hostDisk: a disk image file on the node."""

    path: str | None = None
    type: HostDiskType | None = None
    capacity: str | int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EmptyDiskSource(Model):
    """volumes[].emptyDisk: a scratch disk created on start, gone with the VMI."""

    capacity: str | int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CloudInitNoCloudSource(Model):
    """volumes[].cloudInitNoCloud (secretRef/networkDataSecretRef stay in `extra`)."""

    user_data: str | None = None
    user_data_base64: str | None = None
    network_data: str | None = None
    network_data_base64: str | None = None


# The typed volume sources; each daemon keys its per-source module table by these types.
VolumeSource: TypeAlias = (
    ContainerDiskSource
    | PersistentVolumeClaimSource
    | HostDiskSource
    | EmptyDiskSource
    | CloudInitNoCloudSource
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Volume(Model):
    """spec.volumes[]: exactly one source per volume."""

    name: str | None = None
    container_disk: ContainerDiskSource | None = None
    persistent_volume_claim: PersistentVolumeClaimSource | None = None
    host_disk: HostDiskSource | None = None
    empty_disk: EmptyDiskSource | None = None
    cloud_init_no_cloud: CloudInitNoCloudSource | None = None

    def source(self) -> VolumeSource | None:
        """The typed source set on this volume (the first one, should there be several:
        validation refuses that). Daemons pick their handling of a volume by its type."""
        for value in (
            self.container_disk,
            self.persistent_volume_claim,
            self.host_disk,
            self.empty_disk,
            self.cloud_init_no_cloud,
        ):
            if value is not None:
                return value
        return None

    def sources(self) -> tuple[str, ...]:
        """Wire names of every source set on this volume (typed or not)."""
        typed = (
            ("containerDisk", self.container_disk),
            ("persistentVolumeClaim", self.persistent_volume_claim),
            ("hostDisk", self.host_disk),
            ("emptyDisk", self.empty_disk),
            ("cloudInitNoCloud", self.cloud_init_no_cloud),
        )
        found = [key for key, value in typed if value is not None]
        found += [key for key in UNTYPED_VOLUME_SOURCES if self.extra.get(key) is not None]
        return tuple(found)

    @property
    def is_cloud_init(self) -> bool:
        """True for cloud-init volumes (NoCloud, or ConfigDrive kept untyped)."""
        return self.cloud_init_no_cloud is not None or "cloudInitConfigDrive" in self.sources()


@dataclass(frozen=True, slots=True, kw_only=True)
class PodNetwork(Model):
    """networks[].pod: the pod's default network."""

    vm_network_cidr: str | None = field(default=None, metadata=json_name("vmNetworkCIDR"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Network(Model):
    """spec.networks[]: exactly one source (pod here; multus stays in `extra`)."""

    name: str | None = None
    pod: PodNetwork | None = None

    def sources(self) -> tuple[str, ...]:
        """Wire names of every network source set (typed or not)."""
        found = ["pod"] if self.pod is not None else []
        found += [key for key in UNTYPED_NETWORK_SOURCES if self.extra.get(key) is not None]
        return tuple(found)
