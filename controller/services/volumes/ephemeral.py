"""ephemeral: the claim mounted read-only where a persistentVolumeClaim volume would be
(`vmi-disks/<volume>`, or its block device at `/dev/vmi-disks/<volume>`); the launcher
puts a qcow2 overlay over its disk, so the claim is never written and needs no size."""

from __future__ import annotations

from dataclasses import replace

from controller.services.volumes import pvc
from controller.services.volumes.base import PodVolumes, RenderContext
from shared.model import Volume
from shared.model.volumes import EphemeralSource, PersistentVolumeClaimSource


def render(volume: Volume, source: EphemeralSource, ctx: RenderContext) -> PodVolumes:
    """The claim as a read-only pod volume (never a size for the launcher to make)."""
    claim = source.persistent_volume_claim or PersistentVolumeClaimSource()
    read_only = PersistentVolumeClaimSource(claim_name=claim.claim_name, read_only=True)
    part = pvc.render(volume, read_only, ctx)
    return replace(part, launcher_args=())
