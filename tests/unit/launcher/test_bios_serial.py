"""bootloader.bios.useSerial (KubeVirt's SeaBIOS serial output): admitted, planned and
rendered as `<bios useserial='yes'>`, which libvirt's schema accepts; never with UEFI."""

from __future__ import annotations

import dataclasses
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from launcher.domxml import build
from launcher.plan import _bios_serial
from shared.model import VirtualMachineInstance
from shared.model.unsupported import unsupported_fields
from tests.unit.launcher.test_domxml import PLAN


def _vmi(bootloader: dict[str, object]) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict(
        {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
         "metadata": {"name": "v"},
         "spec": {"domain": {"firmware": {"bootloader": bootloader}}}}
    )  # fmt: skip


def test_use_serial_is_admitted_and_planned() -> None:
    """useSerial true is no longer refused and plans SeaBIOS's serial output; false or
    absent plans none."""
    on = _vmi({"bios": {"useSerial": True}})
    assert unsupported_fields(on) == []
    assert _bios_serial(on) is True
    assert _bios_serial(_vmi({"bios": {"useSerial": False}})) is False
    assert _bios_serial(_vmi({"bios": {}})) is False


def test_use_serial_renders_and_validates(tmp_path: Path) -> None:
    """`<os><bios useserial='yes'/>` appears, and virt-xml-validate accepts the domain."""
    xml = build(dataclasses.replace(PLAN, bios_serial=True))
    bios = ET.fromstring(xml).find("os/bios")
    assert bios is not None and bios.get("useserial") == "yes"
    path = tmp_path / "domain.xml"
    path.write_text(xml)
    done = subprocess.run(
        ["virt-xml-validate", str(path), "domain"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert ET.fromstring(build(PLAN)).find("os/bios") is None
