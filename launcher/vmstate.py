"""Persistent TPM / EFI state on the VM's state claim (shared/vmstate.py), which the pod
mounts at vmstate.MOUNT_DIR.

- TPM: libvirt (9.0, Debian 12) keeps a domain's swtpm state in `<swtpm dir>/<uuid>/tpm2`
  and has no element to move it; the launcher links `<swtpm dir>/<uuid>` to the claim's
  TPM_SUBDIR before the domain is defined, and the device says `persistent_state='yes'`,
  so libvirt runs swtpm_setup only when the claim holds no state yet and never deletes it.
  The link is per launcher (the uuid changes with each VMI: nothing else keys the state).
- EFI: the NVRAM file is the claim's NVRAM_SUBDIR/NVRAM_FILE; libvirt copies the OVMF
  template there when it is absent, and undefine keeps it (launcher/virt.py).
"""

from __future__ import annotations

from pathlib import Path

import structlog

from launcher.errors import InvalidSpec
from shared import vmstate
from shared.model import VirtualMachineInstance

log = structlog.get_logger("launcher.vmstate")


def nvram(vmi: VirtualMachineInstance, *, state_dir: Path) -> Path | None:
    """The persistent NVRAM file in the claim (its dir made), or None when not persistent."""
    if not vmstate.persistent_efi(vmi.spec):
        return None
    path = state_dir / vmstate.NVRAM_SUBDIR / vmstate.NVRAM_FILE
    path.parent.mkdir(mode=0o700, exist_ok=True)
    log.info("vm_state_nvram", path=str(path), reused=path.exists())
    return path


def link_tpm_state(
    vmi: VirtualMachineInstance, *, state_dir: Path, swtpm_storage: Path | None, uuid: str
) -> bool:
    """For a persistent TPM, point libvirt's per-domain swtpm dir at the claim; whether
    the TPM is persistent (InvalidSpec when this launcher knows no swtpm dir)."""
    if not vmstate.persistent_tpm(vmi.spec):
        return False
    if swtpm_storage is None:
        field = f"spec.{vmstate.TPM_FIELD}"
        raise InvalidSpec(f"{field}: no swtpm state dir", {"fields": [{"path": field}]})
    target = state_dir / vmstate.TPM_SUBDIR
    target.mkdir(mode=0o711, exist_ok=True)
    swtpm_storage.mkdir(mode=0o711, parents=True, exist_ok=True)
    link = swtpm_storage / uuid
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target, target_is_directory=True)
    log.info("vm_state_tpm_linked", reused=(target / "tpm2").is_dir())
    return True
