"""What a launcher pod needs for devices.tpm: a writable /tmp.

libvirt runs Debian's swtpm_setup to make the TPM's state, and swtpm_setup writes its
pidfile under /tmp, a path it does not let be changed. The compute container's root
filesystem is read-only (docs/nonroot.md), so a VMI with a TPM gets a small emptyDir
there; other launcher pods stay without one.
"""

from __future__ import annotations

from typing import Any

from shared.model import VirtualMachineInstance

TMP_VOLUME = "tpm-tmp"
TMP_DIR = "/tmp"
TMP_SIZE_LIMIT = "1Mi"


def has_tpm(vmi: VirtualMachineInstance) -> bool:
    """The VMI asks for an emulated TPM (devices.tpm set and not disabled)."""
    tpm = vmi.spec.domain.devices.tpm
    return tpm is not None and tpm.on


def volumes(vmi: VirtualMachineInstance) -> list[dict[str, Any]]:
    """The pod's /tmp emptyDir when the VMI has a TPM."""
    if not has_tpm(vmi):
        return []
    return [{"name": TMP_VOLUME, "emptyDir": {"sizeLimit": TMP_SIZE_LIMIT}}]


def mounts(vmi: VirtualMachineInstance) -> list[dict[str, Any]]:
    """The compute container's /tmp mount when the VMI has a TPM."""
    return [{"name": TMP_VOLUME, "mountPath": TMP_DIR}] if has_tpm(vmi) else []
