"""What this node's libvirt offers guests' CPUs, written for virt-handler's node labeller
(KubeVirt's node-labeller init container does the same with virsh): the domcapabilities
of the virt type launchers here run (kvm when /dev/kvm is usable, else qemu: TCG), and
the host-model CPU expanded to its full feature list. Run by `launcher.seed` with the
launcher image's own libvirt, so the labels describe exactly what launchers can start.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import structlog

from launcher.errors import LibvirtFailure
from launcher.virt import Virt
from shared import cpulabels

log = structlog.get_logger("launcher.nodecpu")


def virt_type(kvm: Path = Path("/dev/kvm")) -> str:
    """kvm when the device is usable here, else qemu (TCG)."""
    return "kvm" if os.access(kvm, os.R_OK | os.W_OK) else "qemu"


def host_model_cpu(domcaps: str) -> str | None:
    """The host-model mode of a domcapabilities document as a `<cpu>` definition (the
    input of a hypervisor baseline), None when libvirt offers no host-model."""
    mode = ET.fromstring(domcaps).find("cpu/mode[@name='host-model']")
    if mode is None or mode.get("supported") != "yes" or mode.find("model") is None:
        return None
    cpu = ET.Element("cpu", mode="custom", match="exact")
    cpu.extend(child for child in mode if child.tag in ("model", "vendor", "feature"))
    return ET.tostring(cpu, encoding="unicode")


async def write_documents(virt: Virt, out: Path, *, kind: str) -> None:
    """Both documents into `out` (replaced atomically, one by one)."""
    domcaps = await virt.domain_capabilities(kind)
    documents = {cpulabels.DOMCAPS_FILE: domcaps}
    cpu = host_model_cpu(domcaps)
    if cpu is not None:
        try:
            documents[cpulabels.FEATURES_FILE] = await virt.expand_cpu(cpu, kind)
        except LibvirtFailure as e:  # the models and host-model labels still stand
            log.warning("cpu_features_not_expanded", error=str(e))
    out.mkdir(parents=True, exist_ok=True)
    for name, text in documents.items():
        tmp = out / f".{name}.{os.getpid()}"
        tmp.write_text(text)
        tmp.chmod(0o644)
        tmp.replace(out / name)
    if cpulabels.FEATURES_FILE not in documents:
        (out / cpulabels.FEATURES_FILE).unlink(missing_ok=True)
    log.info("node_cpu_documents_written", out=str(out), virt_type=kind, files=len(documents))
