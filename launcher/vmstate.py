"""Persistent TPM / EFI state on the VM's state claim (shared/vmstate.py), which the pod
mounts at vmstate.MOUNT_DIR.

- TPM: libvirt (9.0, Debian 12) keeps a domain's swtpm state in `<swtpm dir>/<uuid>/tpm2`
  and has no element to move it; the launcher links `<swtpm dir>/<uuid>` to a state dir
  in the claim before the domain is defined, and the device says `persistent_state='yes'`,
  so libvirt runs swtpm_setup only when that dir holds no state yet and never deletes it.
  The claim's TPM_SUBDIR is a link to the current state dir (`swtpm-<random>`): swtpm 0.7
  locks its dir while it runs, so a migration target's swtpm gets a new dir, QEMU hands it
  the state, and the target makes that dir current once it owns the domain.
- EFI: the NVRAM file is the claim's NVRAM_SUBDIR/NVRAM_FILE; libvirt copies the OVMF
  template there when it is absent, and undefine keeps it (launcher/virt.py).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

import structlog

from launcher.disks import DiskContext
from launcher.errors import InvalidSpec
from shared import vmstate
from shared.model import VirtualMachineInstance

log = structlog.get_logger("launcher.vmstate")


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedState:
    nvram: Path | None  # a persistent NVRAM file in the claim
    tpm_persistent: bool


def prepare(
    vmi: VirtualMachineInstance, *, state_dir: Path, swtpm: Path | None, ctx: DiskContext
) -> PreparedState:
    """The persistent NVRAM file and TPM state dir ready in the claim, before the domain
    is defined (a migration target's TPM in a dir of its own)."""
    uuid = vmi.spec.domain.firmware.uuid or vmi.metadata.uid or ""
    return PreparedState(
        nvram=nvram(vmi, state_dir=state_dir),
        tpm_persistent=link_tpm_state(
            vmi, state_dir=state_dir, swtpm_storage=swtpm, uuid=uuid, incoming=ctx.incoming
        ),
    )


def nvram(vmi: VirtualMachineInstance, *, state_dir: Path) -> Path | None:
    """The persistent NVRAM file in the claim (its dir made), or None when not persistent."""
    if not vmstate.persistent_efi(vmi.spec):
        return None
    path = state_dir / vmstate.NVRAM_SUBDIR / vmstate.NVRAM_FILE
    path.parent.mkdir(mode=0o700, exist_ok=True)
    log.info("vm_state_nvram", path=str(path), reused=path.exists())
    return path


def link_tpm_state(
    vmi: VirtualMachineInstance,
    *,
    state_dir: Path,
    swtpm_storage: Path | None,
    uuid: str,
    incoming: bool = False,
) -> bool:
    """For a persistent TPM, point libvirt's per-domain swtpm dir at a state dir in the
    claim: the current one (made and made current on a first start, stale ones removed),
    or for a migration target a new one (promote_tpm_state makes it current once the
    migration is over); whether the TPM is persistent (InvalidSpec when this launcher
    knows no swtpm dir)."""
    if not vmstate.persistent_tpm(vmi.spec):
        return False
    if swtpm_storage is None:
        field = f"spec.{vmstate.TPM_FIELD}"
        raise InvalidSpec(f"{field}: no swtpm state dir", {"fields": [{"path": field}]})
    target = _new_tpm_dir(state_dir) if incoming else _current_tpm_dir(state_dir)
    swtpm_storage.mkdir(mode=0o711, parents=True, exist_ok=True)
    link = swtpm_storage / uuid
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target, target_is_directory=True)
    log.info("vm_state_tpm_linked", dir=target.name, incoming=incoming,
             reused=(target / "tpm2").is_dir())  # fmt: skip
    return True


def promote_tpm_state(vmi: VirtualMachineInstance, *, state_dir: Path, link: Path) -> None:
    """A migration target's TPM state dir (where `link` points) becomes the claim's
    current one: the source's swtpm kept the old dir locked while it ran, so the target's
    swtpm wrote the migrated state into a dir of its own."""
    if not vmstate.persistent_tpm(vmi.spec) or not link.is_symlink():
        return
    _make_current(state_dir, link.readlink().name)
    log.info("vm_state_tpm_promoted", dir=link.readlink().name)


def promote_migrated_state(
    vmi: VirtualMachineInstance, *, state_dir: Path, swtpm_storage: Path | None
) -> None:
    """On a migration target that owns the domain now: promote_tpm_state at its link."""
    if swtpm_storage is None:
        return
    uuid = vmi.spec.domain.firmware.uuid or vmi.metadata.uid or ""
    promote_tpm_state(vmi, state_dir=state_dir, link=swtpm_storage / uuid)


def _current_tpm_dir(state_dir: Path) -> Path:
    pointer = state_dir / vmstate.TPM_SUBDIR
    current = state_dir / pointer.readlink().name if pointer.is_symlink() else None
    if current is None or not current.is_dir():
        current = _new_tpm_dir(state_dir)
        _make_current(state_dir, current.name)
    for stale in state_dir.glob(f"{vmstate.TPM_SUBDIR}-*"):
        if stale != current and stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
    return current


def _new_tpm_dir(state_dir: Path) -> Path:
    path = state_dir / f"{vmstate.TPM_SUBDIR}-{uuid4().hex[:12]}"
    path.mkdir(mode=0o711)
    return path


def _make_current(state_dir: Path, name: str) -> None:
    """Point the claim's TPM_SUBDIR link at `name`, atomically."""
    tmp = state_dir / f".{vmstate.TPM_SUBDIR}.tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(name, target_is_directory=True)
    os.replace(tmp, state_dir / vmstate.TPM_SUBDIR)
