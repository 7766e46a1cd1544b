"""The node labeller's input, as the seed init container writes it (launcher/nodecpu.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from launcher.nodecpu import host_model_cpu, virt_type
from tests.unit.handler.test_nodelabeller import DOMCAPS


def test_host_model_becomes_a_cpu_definition() -> None:
    """The host-model mode's model, vendor and features, as a custom CPU to expand."""
    cpu = ET.fromstring(host_model_cpu(DOMCAPS) or "")
    assert (cpu.tag, cpu.get("mode"), cpu.findtext("model"), cpu.findtext("vendor")) == (
        "cpu",
        "custom",
        "EPYC",
        "AMD",
    )
    assert [f.get("name") for f in cpu.findall("feature")] == ["acpi", "svme-addr-chk", "vme"]


def test_no_host_model_no_definition() -> None:
    """libvirt offering no host-model: nothing to expand."""
    off = DOMCAPS.replace("name='host-model' supported='yes'", "name='host-model' supported='no'")
    assert host_model_cpu(off) is None


def test_virt_type_follows_the_kvm_device(tmp_path: Path) -> None:
    """qemu (TCG) without a usable /dev/kvm."""
    assert virt_type(tmp_path / "kvm") == "qemu"
