"""persistentVolumeClaim. Filesystem mode: the claim as a pod volume mounted at
`vmi-disks/<volume>`, where the launcher finds (or makes) `disk.img`; readOnly claims are
mounted read-only. The size of a disk.img the launcher makes is the claim's, passed as
`--claim-capacity <volume>=<bytes>` (KubeVirt reads it from the VMI's volumeStatus).
Block mode: the claim's device in the compute container (`volumeDevices`) at
`/dev/vmi-disks/<volume>`, which the launcher gives the guest as it is (`<disk
type='block'>`); the kubelet and the runtime allow the container that device."""

from __future__ import annotations

from typing import Any

from controller.services.volumes.base import PodVolumes, RenderContext
from shared import podlayout
from shared.model import Volume
from shared.model.volumes import PersistentVolumeClaimSource

CLAIM_CAPACITY_ARG = "--claim-capacity"


def render(volume: Volume, source: PersistentVolumeClaimSource, ctx: RenderContext) -> PodVolumes:
    """The claim's pod volume, its mount and the disk size the launcher may need; nothing
    for a hotpluggable claim (its attachment pod mounts it: controller/vmi/hotplug.py)."""
    if source.hotpluggable:
        return PodVolumes()
    name = volume.name or ""
    pod_volume = podlayout.pod_volume_name(name)
    read_only = bool(source.read_only)
    claim_ref: dict[str, Any] = {"claimName": source.claim_name or ""}
    mount: dict[str, Any] = {
        "name": pod_volume,
        "mountPath": f"{podlayout.VMI_DISKS_DIR}/{podlayout.vmi_disk_dir(name)}",
    }
    if read_only:
        claim_ref["readOnly"] = True
        mount["readOnly"] = True
    claim = ctx.claims.get(source.claim_name or "")
    if claim is not None and claim.block:
        device = f"{podlayout.BLOCK_DEVICES_DIR}/{podlayout.block_device(name)}"
        return PodVolumes(
            volumes=({"name": pod_volume, "persistentVolumeClaim": claim_ref},),
            devices=({"name": pod_volume, "devicePath": device},),
        )
    size = claim.disk_bytes if claim is not None else None
    args = (CLAIM_CAPACITY_ARG, f"{name}={size}") if size else ()
    return PodVolumes(
        volumes=({"name": pod_volume, "persistentVolumeClaim": claim_ref},),
        mounts=(mount,),
        launcher_args=args,
    )
