"""The kubelet device-plugin API v1beta1 messages (proto package ``v1beta1``), written
from the public API definition as typed dataclasses; field numbers are the proto's.

Only what kubevirt-py uses is modelled; fields it does not know (TopologyInfo, CDI devices)
are skipped when decoding, as protobuf requires, and never sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from shared.deviceplugin.protowire import Kind, MessageBase, pb

API_VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
DEFAULT_DIR = Path("/var/lib/kubelet/device-plugins")


class Health(StrEnum):
    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"


_Message = MessageBase  # encode()/decode() for the dataclasses below


@dataclass(frozen=True, slots=True, kw_only=True)
class Empty(_Message):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class DevicePluginOptions(_Message):
    pre_start_required: bool = field(default=False, metadata=pb(1, Kind.BOOL))
    get_preferred_allocation_available: bool = field(default=False, metadata=pb(2, Kind.BOOL))


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterRequest(_Message):
    version: str = field(default="", metadata=pb(1, Kind.STRING))
    endpoint: str = field(default="", metadata=pb(2, Kind.STRING))  # a socket name in the dir
    resource_name: str = field(default="", metadata=pb(3, Kind.STRING))
    options: DevicePluginOptions | None = field(
        default=None, metadata=pb(4, Kind.MESSAGE, DevicePluginOptions)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Device(_Message):
    id: str = field(default="", metadata=pb(1, Kind.STRING))
    health: str = field(default="", metadata=pb(2, Kind.STRING))  # a Health, kept as sent


@dataclass(frozen=True, slots=True, kw_only=True)
class ListAndWatchResponse(_Message):
    devices: tuple[Device, ...] = field(default=(), metadata=pb(1, Kind.REPEATED_MESSAGE, Device))

    def healthy(self) -> int:
        return sum(1 for d in self.devices if d.health == Health.HEALTHY)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerAllocateRequest(_Message):
    devices_ids: tuple[str, ...] = field(default=(), metadata=pb(1, Kind.REPEATED_STRING))


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocateRequest(_Message):
    container_requests: tuple[ContainerAllocateRequest, ...] = field(
        default=(), metadata=pb(1, Kind.REPEATED_MESSAGE, ContainerAllocateRequest)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Mount(_Message):
    container_path: str = field(default="", metadata=pb(1, Kind.STRING))
    host_path: str = field(default="", metadata=pb(2, Kind.STRING))
    read_only: bool = field(default=False, metadata=pb(3, Kind.BOOL))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceSpec(_Message):
    container_path: str = field(default="", metadata=pb(1, Kind.STRING))
    host_path: str = field(default="", metadata=pb(2, Kind.STRING))
    permissions: str = field(default="", metadata=pb(3, Kind.STRING))  # cgroup style: "rw", "r"


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerAllocateResponse(_Message):
    envs: Mapping[str, str] = field(default_factory=dict, metadata=pb(1, Kind.STRING_MAP))
    mounts: tuple[Mount, ...] = field(default=(), metadata=pb(2, Kind.REPEATED_MESSAGE, Mount))
    devices: tuple[DeviceSpec, ...] = field(
        default=(), metadata=pb(3, Kind.REPEATED_MESSAGE, DeviceSpec)
    )
    annotations: Mapping[str, str] = field(default_factory=dict, metadata=pb(4, Kind.STRING_MAP))


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocateResponse(_Message):
    container_responses: tuple[ContainerAllocateResponse, ...] = field(
        default=(), metadata=pb(1, Kind.REPEATED_MESSAGE, ContainerAllocateResponse)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerPreferredAllocationRequest(_Message):
    available_device_ids: tuple[str, ...] = field(default=(), metadata=pb(1, Kind.REPEATED_STRING))
    must_include_device_ids: tuple[str, ...] = field(
        default=(), metadata=pb(2, Kind.REPEATED_STRING)
    )
    allocation_size: int = field(default=0, metadata=pb(3, Kind.INT))


@dataclass(frozen=True, slots=True, kw_only=True)
class PreferredAllocationRequest(_Message):
    container_requests: tuple[ContainerPreferredAllocationRequest, ...] = field(
        default=(), metadata=pb(1, Kind.REPEATED_MESSAGE, ContainerPreferredAllocationRequest)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ContainerPreferredAllocationResponse(_Message):
    device_ids: tuple[str, ...] = field(default=(), metadata=pb(1, Kind.REPEATED_STRING))


@dataclass(frozen=True, slots=True, kw_only=True)
class PreferredAllocationResponse(_Message):
    container_responses: tuple[ContainerPreferredAllocationResponse, ...] = field(
        default=(), metadata=pb(1, Kind.REPEATED_MESSAGE, ContainerPreferredAllocationResponse)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PreStartContainerRequest(_Message):
    devices_ids: tuple[str, ...] = field(default=(), metadata=pb(1, Kind.REPEATED_STRING))


@dataclass(frozen=True, slots=True, kw_only=True)
class PreStartContainerResponse(_Message):
    pass
