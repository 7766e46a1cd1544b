"""devices.tpm: an emulated TPM 2.0 in the domain XML.

libvirt starts Debian's swtpm for it (swtpm_setup makes the state) and stops it with QEMU:
the launcher only asks for the device. The model is tpm-tis, as KubeVirt's converter uses
for a TPM without persistent state (it keeps tpm-crb for persistent ones). The state lives
in libvirt's own dirs, which are the launcher's private ones (launcher/daemonpaths.py): it
goes with the launcher pod, as KubeVirt's non-persistent TPM does.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

MODEL = "tpm-tis"
VERSION = "2.0"


def add_device(devices: ET.Element) -> None:
    """Append `<tpm>` with an emulator backend to the domain's `<devices>`."""
    tpm = ET.SubElement(devices, "tpm", model=MODEL)
    ET.SubElement(tpm, "backend", type="emulator", version=VERSION)
