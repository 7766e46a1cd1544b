"""The kubelet device-plugin API v1beta1, shared by virt-handler (the plugins) and the
local cluster's node agent (the kubelet side), so one code path runs everywhere.

- `messages`: the API's messages as typed dataclasses, with a hand-written protobuf codec
  (`protowire`) driven by their field metadata;
- `rpc`: the only module that imports grpc: servers and clients over unix sockets;
- `errors`: typed errors (a refused registration names its field).
"""

from shared.deviceplugin.errors import (
    AllocationRefused,
    CallFailed,
    DecodeError,
    DevicePluginError,
    RegistrationRefused,
)
from shared.deviceplugin.messages import (
    API_VERSION,
    DEFAULT_DIR,
    KUBELET_SOCKET,
    AllocateRequest,
    AllocateResponse,
    ContainerAllocateRequest,
    ContainerAllocateResponse,
    Device,
    DevicePluginOptions,
    DeviceSpec,
    Empty,
    Health,
    ListAndWatchResponse,
    Mount,
    PreferredAllocationRequest,
    PreferredAllocationResponse,
    PreStartContainerRequest,
    PreStartContainerResponse,
    RegisterRequest,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_DIR",
    "KUBELET_SOCKET",
    "AllocateRequest",
    "AllocateResponse",
    "AllocationRefused",
    "CallFailed",
    "ContainerAllocateRequest",
    "ContainerAllocateResponse",
    "DecodeError",
    "Device",
    "DevicePluginError",
    "DevicePluginOptions",
    "DeviceSpec",
    "Empty",
    "Health",
    "ListAndWatchResponse",
    "Mount",
    "PreStartContainerRequest",
    "PreStartContainerResponse",
    "PreferredAllocationRequest",
    "PreferredAllocationResponse",
    "RegisterRequest",
    "RegistrationRefused",
]
