"""devices.tpm: an emulated TPM 2.0 in the domain XML.

libvirt starts Debian's swtpm for it (swtpm_setup makes the state) and stops it with QEMU:
the launcher only asks for the device. The model is tpm-tis, as KubeVirt's converter uses
for a TPM without persistent state, persistent or not (KubeVirt gives a persistent one
tpm-crb, which a guest finds only through ACPI; tpm-tis is found either way, and turning
persistence on does not change the guest's hardware); a persistent one adds
`persistent_state='yes'`. A non-persistent state lives in libvirt's own dirs, the
launcher's private ones (launcher/daemonpaths.py), and goes with the launcher pod; a
persistent one is in the VM's state claim (launcher/vmstate.py).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

MODEL = "tpm-tis"
VERSION = "2.0"


def add_device(devices: ET.Element, *, persistent: bool = False) -> None:
    """Append `<tpm>` with an emulator backend to the domain's `<devices>`."""
    tpm = ET.SubElement(devices, "tpm", model=MODEL)
    backend = ET.SubElement(tpm, "backend", type="emulator", version=VERSION)
    if persistent:
        backend.set("persistent_state", "yes")
