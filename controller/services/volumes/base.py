"""What a volume source adds to the launcher pod, and what the renderers are given."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.services.volumes.claims import Claim


@dataclass(frozen=True, slots=True, kw_only=True)
class PodVolumes:
    """Pod volumes, compute-container mounts, init containers, launcher arguments, the
    service account the pod runs as (a serviceAccount volume's; None: none) and the
    Secrets the kubelet pulls the pod's images with (containerDisk/kernelBoot
    ``imagePullSecret``)."""

    volumes: tuple[dict[str, Any], ...] = ()
    mounts: tuple[dict[str, Any], ...] = ()
    devices: tuple[dict[str, Any], ...] = ()  # the compute container's volumeDevices
    init_containers: tuple[dict[str, Any], ...] = ()
    launcher_args: tuple[str, ...] = ()
    service_account_name: str | None = None
    pull_secrets: tuple[str, ...] = ()

    @staticmethod
    def merged(parts: Iterable[PodVolumes]) -> PodVolumes:
        """The parts concatenated, in order (each pull secret once)."""
        parts = list(parts)
        return PodVolumes(
            volumes=tuple(v for p in parts for v in p.volumes),
            mounts=tuple(m for p in parts for m in p.mounts),
            devices=tuple(d for p in parts for d in p.devices),
            init_containers=tuple(c for p in parts for c in p.init_containers),
            launcher_args=tuple(a for p in parts for a in p.launcher_args),
            service_account_name=next(
                (p.service_account_name for p in parts if p.service_account_name), None
            ),
            pull_secrets=tuple(dict.fromkeys(s for p in parts for s in p.pull_secrets)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderContext:
    """What renderers know beyond the volume: the claims the controller read (by name),
    and whether images are mounted as image volumes (else copied by init containers)."""

    claims: Mapping[str, Claim] = field(default_factory=dict)
    image_volumes: bool = False
