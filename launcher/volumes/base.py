"""What a volume source module is given and returns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from launcher.disks import DiskContext
from shared.model import VirtualMachineInstance


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeRequest:
    """One volume to resolve: its VMI, name, the disk context and its field path."""

    vmi: VirtualMachineInstance
    name: str
    ctx: DiskContext
    field: str  # spec.volumes[i]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolvedDisk:
    """The file backing a volume, its format, whether the guest may only read it, and
    the files this start made for it (removed again should the start fail).

    `shared`: the file lives on the claim's storage, which the migration target opens as
    well (never copied by a migration); `cache`: QEMU's cache mode, None for libvirt's
    default."""

    path: Path
    format: str
    readonly: bool = False
    created: tuple[Path, ...] = ()
    shared: bool = False
    cache: str | None = None
    block: bool = False  # `path` is a block device (a block-mode claim), not a file
