"""The launcher pod's share of each VMI volume: one module per source that needs the pod
to carry something, picked by the type of the volume's source (a table, not if-chains).

Sources without an entry (emptyDisk, downwardMetrics) are made by the launcher alone.
Adding a source: the model's typed field, its validation, a module here and one in
launcher/volumes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controller.services.volumes import (
    cloudinit,
    config,
    containerdisk,
    credentials,
    ephemeral,
    hostdisk,
    pvc,
    sysprep,
)
from controller.services.volumes.base import PodVolumes, RenderContext
from controller.services.volumes.claims import Claim, ClaimReason, read_claims
from shared.model import VirtualMachineInstance, Volume
from shared.model.volumes import (
    CloudInitConfigDriveSource,
    CloudInitNoCloudSource,
    ConfigMapSource,
    ContainerDiskSource,
    DownwardAPISource,
    EphemeralSource,
    HostDiskSource,
    PersistentVolumeClaimSource,
    SecretSource,
    ServiceAccountSource,
    SysprepSource,
)

__all__ = ["Claim", "ClaimReason", "PodVolumes", "RenderContext", "read_claims", "render"]

# (volume, its typed source, context); each module takes its own source type.
Renderer = Callable[[Volume, Any, RenderContext], PodVolumes]

RENDERERS: Mapping[type[Any], Renderer] = {
    ContainerDiskSource: containerdisk.render,
    PersistentVolumeClaimSource: pvc.render,
    HostDiskSource: hostdisk.render,
    CloudInitNoCloudSource: cloudinit.render,
    CloudInitConfigDriveSource: cloudinit.render,
    ConfigMapSource: config.render_config_map,
    SecretSource: config.render_secret,
    DownwardAPISource: config.render_downward_api,
    ServiceAccountSource: config.render_service_account,
    EphemeralSource: ephemeral.render,
    SysprepSource: sysprep.render,
}


def render(vmi: VirtualMachineInstance, ctx: RenderContext) -> PodVolumes:
    """Everything the VMI's volumes (and kernelBoot, and the access credentials' Secrets)
    add to its launcher pod, in spec order."""
    parts = []
    for volume in vmi.spec.volumes:
        source = volume.source()
        renderer = RENDERERS.get(type(source)) if source is not None else None
        if renderer is not None and volume.name:
            parts.append(renderer(volume, source, ctx))
    parts.append(containerdisk.kernel_boot(vmi, ctx))
    parts.append(credentials.render(vmi))
    return PodVolumes.merged(parts)
