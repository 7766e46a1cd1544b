"""A VM's persistent state (KubeVirt's "backend storage"): the claim that keeps a
persistent TPM's swtpm state and a persistent EFI's variable store across restarts.

The controller makes one claim per VM, `persistent-state-for-<vm>` (KubeVirt's name, cut
with a hash when too long), of the KubeVirt CR's `spec.configuration.vmStateStorageClass`,
owned by the VM so the garbage collector deletes it with the VM. The launcher pod mounts it
at MOUNT_DIR; the launcher keeps the swtpm state in TPM_SUBDIR and the NVRAM in
NVRAM_SUBDIR there. This module is the contract the controller, the handler and the
launcher share.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from shared import naming
from shared.model import VirtualMachineInstance, VMISpec

CLAIM_PREFIX = "persistent-state-for-"
CLAIM_SIZE = "10Mi"  # KubeVirt's size: a TPM state and an NVRAM are a few hundred KiB
VOLUME = "vm-state"
MOUNT_DIR = PurePosixPath("/var/run/kubevirt-private/vm-state")
TPM_SUBDIR = "swtpm"
NVRAM_SUBDIR = "nvram"
NVRAM_FILE = "efi-vars.fd"
TPM_FIELD = "domain.devices.tpm.persistent"
EFI_FIELD = "domain.firmware.bootloader.efi.persistent"
CLASS_FIELD = "spec.configuration.vmStateStorageClass"


def claim_name(vm_name: str) -> str:
    """The VM's state claim: `persistent-state-for-<vm>`, at most 63 characters."""
    return naming.fit(CLAIM_PREFIX + vm_name)


def persistent_tpm(spec: VMISpec) -> bool:
    """devices.tpm is on and persistent."""
    tpm = spec.domain.devices.tpm
    return tpm is not None and tpm.on and tpm.persistent is True


def persistent_efi(spec: VMISpec) -> bool:
    """firmware.bootloader.efi is set and persistent."""
    efi = spec.domain.firmware.efi
    return efi is not None and efi.persistent is True


def needed(spec: VMISpec) -> bool:
    """The VMI keeps state in a claim (a persistent TPM or EFI)."""
    return persistent_tpm(spec) or persistent_efi(spec)


def vmi_claim(vmi: VirtualMachineInstance) -> str | None:
    """The state claim the VMI's pod mounts (its VM's, or its own name's), or None."""
    if not needed(vmi.spec):
        return None
    ref = vmi.metadata.controller_ref()
    owner = ref.name if ref is not None and ref.kind == "VirtualMachine" and ref.name else None
    return claim_name(owner or vmi.name)
