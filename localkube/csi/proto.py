"""The CSI v1 messages the test-bed driver speaks (proto package ``csi.v1``) and the
kubelet's plugin-registration v1 messages (package ``pluginregistration``), written from
csi.proto (container-storage-interface/spec v1.13.0) and the kubelet's api.proto as typed
dataclasses on the device plugins' protobuf wire codec; field numbers are the protos'.

Only what the driver uses is modelled: unknown fields (secrets, topology, mutable
parameters) are skipped when decoding, as protobuf requires.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from shared.deviceplugin.protowire import Kind, MessageBase, pb

CSI_PACKAGE = "csi.v1"
REGISTRATION_SERVICE = "pluginregistration.Registration"


_Message = MessageBase


def _str(n: int) -> str:
    return field(default="", metadata=pb(n, Kind.STRING))


def _int(n: int) -> int:
    return field(default=0, metadata=pb(n, Kind.INT))


def _bool(n: int) -> bool:
    return field(default=False, metadata=pb(n, Kind.BOOL))


class ServiceType(IntEnum):
    CONTROLLER_SERVICE = 1


class ExpansionType(IntEnum):
    ONLINE = 1


class ControllerRpc(IntEnum):
    CREATE_DELETE_VOLUME = 1
    CREATE_DELETE_SNAPSHOT = 5
    LIST_SNAPSHOTS = 6
    CLONE_VOLUME = 7
    EXPAND_VOLUME = 9


class NodeRpc(IntEnum):
    GET_VOLUME_STATS = 2
    EXPAND_VOLUME = 3


class AccessModeType(IntEnum):
    UNKNOWN = 0
    SINGLE_NODE_WRITER = 1
    SINGLE_NODE_READER_ONLY = 2
    MULTI_NODE_READER_ONLY = 3
    MULTI_NODE_SINGLE_WRITER = 4
    MULTI_NODE_MULTI_WRITER = 5
    SINGLE_NODE_SINGLE_WRITER = 6
    SINGLE_NODE_MULTI_WRITER = 7


@dataclass(frozen=True, slots=True, kw_only=True)
class Empty(_Message):
    pass


# -- identity ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class GetPluginInfoResponse(_Message):
    name: str = _str(1)
    vendor_version: str = _str(2)


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeCap(_Message):
    """{Type type = 1}: PluginCapability.Service/VolumeExpansion, the services' RPC."""

    type: int = _int(1)


@dataclass(frozen=True, slots=True, kw_only=True)
class PluginCapability(_Message):
    service: TypeCap | None = field(default=None, metadata=pb(1, Kind.MESSAGE, TypeCap))
    volume_expansion: TypeCap | None = field(default=None, metadata=pb(2, Kind.MESSAGE, TypeCap))


@dataclass(frozen=True, slots=True, kw_only=True)
class GetPluginCapabilitiesResponse(_Message):
    capabilities: tuple[PluginCapability, ...] = field(
        default=(), metadata=pb(1, Kind.REPEATED_MESSAGE, PluginCapability)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeResponse(_Message):
    pass  # `ready` unset means ready


# -- volumes ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class MountVolume(_Message):
    fs_type: str = _str(1)
    mount_flags: tuple[str, ...] = field(default=(), metadata=pb(2, Kind.REPEATED_STRING))


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessMode(_Message):
    mode: int = _int(1)


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeCapability(_Message):
    block: Empty | None = field(default=None, metadata=pb(1, Kind.MESSAGE, Empty))
    mount: MountVolume | None = field(default=None, metadata=pb(2, Kind.MESSAGE, MountVolume))
    access_mode: AccessMode | None = field(default=None, metadata=pb(3, Kind.MESSAGE, AccessMode))


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityRange(_Message):
    required_bytes: int = _int(1)
    limit_bytes: int = _int(2)


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotSource(_Message):
    snapshot_id: str = _str(1)


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeSource(_Message):
    volume_id: str = _str(1)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentSource(_Message):
    snapshot: SnapshotSource | None = field(
        default=None, metadata=pb(1, Kind.MESSAGE, SnapshotSource)
    )
    volume: VolumeSource | None = field(default=None, metadata=pb(2, Kind.MESSAGE, VolumeSource))


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateVolumeRequest(_Message):
    name: str = _str(1)
    capacity_range: CapacityRange | None = field(
        default=None, metadata=pb(2, Kind.MESSAGE, CapacityRange)
    )
    volume_capabilities: tuple[VolumeCapability, ...] = field(
        default=(), metadata=pb(3, Kind.REPEATED_MESSAGE, VolumeCapability)
    )
    parameters: dict[str, str] = field(default_factory=dict, metadata=pb(4, Kind.STRING_MAP))
    volume_content_source: ContentSource | None = field(
        default=None, metadata=pb(6, Kind.MESSAGE, ContentSource)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Volume(_Message):
    capacity_bytes: int = _int(1)
    volume_id: str = _str(2)
    volume_context: dict[str, str] = field(default_factory=dict, metadata=pb(3, Kind.STRING_MAP))
    content_source: ContentSource | None = field(
        default=None, metadata=pb(4, Kind.MESSAGE, ContentSource)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateVolumeResponse(_Message):
    volume: Volume | None = field(default=None, metadata=pb(1, Kind.MESSAGE, Volume))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteVolumeRequest(_Message):
    volume_id: str = _str(1)


@dataclass(frozen=True, slots=True, kw_only=True)
class RpcCap(_Message):
    """ControllerServiceCapability / NodeServiceCapability: {RPC rpc = 1}."""

    rpc: TypeCap | None = field(default=None, metadata=pb(1, Kind.MESSAGE, TypeCap))


@dataclass(frozen=True, slots=True, kw_only=True)
class CapabilitiesResponse(_Message):
    """ControllerGetCapabilitiesResponse / NodeGetCapabilitiesResponse."""

    capabilities: tuple[RpcCap, ...] = field(
        default=(), metadata=pb(1, Kind.REPEATED_MESSAGE, RpcCap)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidateVolumeCapabilitiesRequest(_Message):
    volume_id: str = _str(1)
    volume_capabilities: tuple[VolumeCapability, ...] = field(
        default=(), metadata=pb(3, Kind.REPEATED_MESSAGE, VolumeCapability)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Confirmed(_Message):
    volume_capabilities: tuple[VolumeCapability, ...] = field(
        default=(), metadata=pb(2, Kind.REPEATED_MESSAGE, VolumeCapability)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ValidateVolumeCapabilitiesResponse(_Message):
    confirmed: Confirmed | None = field(default=None, metadata=pb(1, Kind.MESSAGE, Confirmed))
    message: str = _str(2)


# -- snapshots ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Timestamp(_Message):
    seconds: int = _int(1)
    nanos: int = _int(2)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateSnapshotRequest(_Message):
    source_volume_id: str = _str(1)
    name: str = _str(2)


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot(_Message):
    size_bytes: int = _int(1)
    snapshot_id: str = _str(2)
    source_volume_id: str = _str(3)
    creation_time: Timestamp | None = field(default=None, metadata=pb(4, Kind.MESSAGE, Timestamp))
    ready_to_use: bool = _bool(5)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateSnapshotResponse(_Message):
    snapshot: Snapshot | None = field(default=None, metadata=pb(1, Kind.MESSAGE, Snapshot))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteSnapshotRequest(_Message):
    snapshot_id: str = _str(1)


@dataclass(frozen=True, slots=True, kw_only=True)
class ListSnapshotsRequest(_Message):
    source_volume_id: str = _str(3)
    snapshot_id: str = _str(4)


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotEntry(_Message):
    snapshot: Snapshot | None = field(default=None, metadata=pb(1, Kind.MESSAGE, Snapshot))


@dataclass(frozen=True, slots=True, kw_only=True)
class ListSnapshotsResponse(_Message):
    entries: tuple[SnapshotEntry, ...] = field(
        default=(), metadata=pb(1, Kind.REPEATED_MESSAGE, SnapshotEntry)
    )


# -- expansion ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerExpandVolumeRequest(_Message):
    volume_id: str = _str(1)
    capacity_range: CapacityRange | None = field(
        default=None, metadata=pb(2, Kind.MESSAGE, CapacityRange)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerExpandVolumeResponse(_Message):
    capacity_bytes: int = _int(1)
    node_expansion_required: bool = _bool(2)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeExpandVolumeRequest(_Message):
    volume_id: str = _str(1)
    volume_path: str = _str(2)
    capacity_range: CapacityRange | None = field(
        default=None, metadata=pb(3, Kind.MESSAGE, CapacityRange)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeExpandVolumeResponse(_Message):
    capacity_bytes: int = _int(1)


# -- node -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class NodePublishVolumeRequest(_Message):
    volume_id: str = _str(1)
    target_path: str = _str(4)
    volume_capability: VolumeCapability | None = field(
        default=None, metadata=pb(5, Kind.MESSAGE, VolumeCapability)
    )
    readonly: bool = _bool(6)
    volume_context: dict[str, str] = field(default_factory=dict, metadata=pb(8, Kind.STRING_MAP))


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeUnpublishVolumeRequest(_Message):
    volume_id: str = _str(1)
    target_path: str = _str(2)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeGetInfoResponse(_Message):
    node_id: str = _str(1)
    max_volumes_per_node: int = _int(2)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeGetVolumeStatsRequest(_Message):
    volume_id: str = _str(1)
    volume_path: str = _str(2)


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeUsage(_Message):
    available: int = _int(1)
    total: int = _int(2)
    used: int = _int(3)
    unit: int = _int(4)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeGetVolumeStatsResponse(_Message):
    usage: tuple[VolumeUsage, ...] = field(
        default=(), metadata=pb(1, Kind.REPEATED_MESSAGE, VolumeUsage)
    )


# -- kubelet plugin registration (pluginregistration v1) ------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PluginInfo(_Message):
    type: str = _str(1)
    name: str = _str(2)
    endpoint: str = _str(3)
    supported_versions: tuple[str, ...] = field(default=(), metadata=pb(4, Kind.REPEATED_STRING))


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistrationStatus(_Message):
    plugin_registered: bool = _bool(1)
    error: str = _str(2)
