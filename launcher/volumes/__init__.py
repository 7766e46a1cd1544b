"""Each VMI volume resolved to the file that backs its disk: one module per source,
picked by the type of the volume's source (a table, not if-chains).

Adding a source: the model's typed field, its validation, a module here and (when the
pod must carry something for it) one in controller/volumes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from launcher.errors import DiskFailure
from launcher.volumes import (
    cloudinit,
    config,
    configdrive,
    containerdisk,
    downwardmetrics,
    emptydisk,
    ephemeral,
    hostdisk,
    pvc,
    sysprep,
)
from launcher.volumes.base import ResolvedDisk, VolumeRequest
from shared.model.volumes import (
    CloudInitConfigDriveSource,
    CloudInitNoCloudSource,
    ConfigMapSource,
    ContainerDiskSource,
    DownwardAPISource,
    DownwardMetricsVolumeSource,
    EmptyDiskSource,
    EphemeralSource,
    HostDiskSource,
    PersistentVolumeClaimSource,
    SecretSource,
    ServiceAccountSource,
    SysprepSource,
)

__all__ = ["RESOLVERS", "ResolvedDisk", "VolumeRequest", "resolve"]

Resolver = Callable[[VolumeRequest, Any], Awaitable[ResolvedDisk]]

RESOLVERS: Mapping[type[Any], Resolver] = {
    ContainerDiskSource: containerdisk.resolve,
    CloudInitNoCloudSource: cloudinit.resolve,
    CloudInitConfigDriveSource: configdrive.resolve,
    ConfigMapSource: config.resolve,
    SecretSource: config.resolve,
    DownwardAPISource: config.resolve,
    ServiceAccountSource: config.resolve,
    EmptyDiskSource: emptydisk.resolve,
    HostDiskSource: hostdisk.resolve,
    PersistentVolumeClaimSource: pvc.resolve,
    EphemeralSource: ephemeral.resolve,
    SysprepSource: sysprep.resolve,
    DownwardMetricsVolumeSource: downwardmetrics.resolve,
}


async def resolve(req: VolumeRequest, source: object) -> ResolvedDisk:
    """The disk of one volume, by its source's module."""
    resolver = RESOLVERS.get(type(source)) if source is not None else None
    if resolver is None:
        raise DiskFailure(f"{req.field}: volume {req.name!r} has no supported source")
    return await resolver(req, source)
