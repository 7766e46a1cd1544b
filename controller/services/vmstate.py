"""What a launcher pod needs for persistent TPM / EFI state: the VM's state claim
(shared/vmstate.py, made by controller/vmi/vmstate.py) mounted at its fixed path."""

from __future__ import annotations

from typing import Any

from shared import vmstate
from shared.model import VirtualMachineInstance


def volumes(vmi: VirtualMachineInstance) -> list[dict[str, Any]]:
    """The state claim as a pod volume when the VMI keeps state."""
    claim = vmstate.vmi_claim(vmi)
    if claim is None:
        return []
    return [{"name": vmstate.VOLUME, "persistentVolumeClaim": {"claimName": claim}}]


def mounts(vmi: VirtualMachineInstance) -> list[dict[str, Any]]:
    """The compute container's mount of the state claim when the VMI keeps state."""
    if vmstate.vmi_claim(vmi) is None:
        return []
    return [{"name": vmstate.VOLUME, "mountPath": str(vmstate.MOUNT_DIR)}]
