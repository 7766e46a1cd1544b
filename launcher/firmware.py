"""The guest's firmware: SeaBIOS (QEMU's default: nothing to resolve) or UEFI from
Debian's `ovmf` package, which the launcher image carries.

- efi with secureBoot false: OVMF_CODE_4M.fd, an empty variable store;
- efi with secure boot: OVMF_CODE_4M.secboot.fd (SMM-protected flash) and a store with
  Microsoft's keys enrolled (OVMF_VARS_4M.ms.fd), as KubeVirt's secure boot uses.
The variable store is this VM's own, in the launcher's private disk dir: libvirt copies
it from the template on first start and it lives as long as the pod; with efi.persistent
it is in the VM's state claim instead (launcher/vmstate.py) and outlives the pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from launcher.domxml import FirmwarePlan
from launcher.errors import InvalidSpec
from shared.model import VirtualMachineInstance

OVMF_DIR = Path("/usr/share/OVMF")
NVRAM_FILE = "efi-vars.fd"
EFI_FIELD = "spec.domain.firmware.bootloader.efi"


@dataclass(frozen=True, slots=True)
class OvmfFiles:
    code: str
    vars_template: str


OVMF: dict[bool, OvmfFiles] = {
    False: OvmfFiles("OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd"),
    True: OvmfFiles("OVMF_CODE_4M.secboot.fd", "OVMF_VARS_4M.ms.fd"),
}


def firmware_plan(
    vmi: VirtualMachineInstance,
    *,
    work_dir: Path,
    ovmf_dir: Path = OVMF_DIR,
    nvram: Path | None = None,
) -> FirmwarePlan | None:
    """OVMF for an efi VMI (None: SeaBIOS), its NVRAM at `nvram` (a persistent one) or
    in `work_dir`; InvalidSpec naming the field when the firmware is not installed here."""
    efi = vmi.spec.domain.firmware.efi
    if efi is None:
        return None
    files = OVMF[efi.secure]
    plan = FirmwarePlan(
        loader=ovmf_dir / files.code,
        nvram=nvram or work_dir / NVRAM_FILE,
        nvram_template=ovmf_dir / files.vars_template,
        secure=efi.secure,
    )
    for path in (plan.loader, plan.nvram_template):
        if not path.is_file():
            raise InvalidSpec(
                f"{EFI_FIELD}: the UEFI firmware {path} is not installed (Debian's ovmf)",
                {"fields": [{"path": EFI_FIELD, "message": f"{path} is not installed"}]},
            )
    return plan


def machine_type(vmi: VirtualMachineInstance) -> str:
    """machine.type; when unset q35 (admission's default, as KubeVirt's)."""
    return vmi.spec.domain.machine.type or "q35"
