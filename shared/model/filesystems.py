"""devices.filesystems: a volume shared with the guest as a directory through virtiofs, not
as a disk (KubeVirt's). Each one is served by its own virtiofsd, unprivileged, in the
launcher pod's `virtiofs-<name>` container (controller/services/virtiofs.py); the guest
mounts it by its name: `mount -t virtiofs <name> /mnt` (launcher/virtiofs.py)."""

from __future__ import annotations

from dataclasses import dataclass

from shared.model._codec import Model


@dataclass(frozen=True, slots=True, kw_only=True)
class FilesystemVirtiofs(Model):
    """filesystems[].virtiofs: `{}`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Filesystem(Model):
    """devices.filesystems[]: paired by name with spec.volumes[]; the name is the tag."""

    name: str | None = None
    virtiofs: FilesystemVirtiofs | None = None
