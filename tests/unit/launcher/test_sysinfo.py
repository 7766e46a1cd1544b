"""The guest's firmware tables beside the boot loader: firmware.acpi's SLIC table read
from its Secret volume's mount (`slic.bin`), rendered in `<os><acpi>`, accepted by
libvirt's schema; a Secret without the key fails naming the field."""

from __future__ import annotations

import dataclasses
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from launcher.disks import DiskContext
from launcher.domxml import build
from launcher.errors import DiskFailure
from launcher.sysinfo import acpi_tables
from shared import podlayout
from shared.model import VirtualMachineInstance
from tests.unit.launcher.test_domxml import PLAN


def _vmi(acpi: dict[str, Any] | None) -> VirtualMachineInstance:
    domain: dict[str, Any] = {"firmware": {"acpi": acpi}} if acpi is not None else {}
    spec = {"domain": domain, "volumes": [{"name": "oem", "secret": {"secretName": "t"}}]}
    return VirtualMachineInstance.from_dict({"metadata": {"name": "v"}, "spec": spec})


def _ctx(tmp_path: Path) -> DiskContext:
    return DiskContext(work_dir=tmp_path, container_disks=tmp_path / "c", vmi_disks=tmp_path / "v")


def test_slic_comes_from_the_secrets_key(tmp_path: Path) -> None:
    """slicNameRef's volume mount holds slic.bin: the table is that file; no acpi: none."""
    ctx = _ctx(tmp_path)
    mount = ctx.config_mount_of(podlayout.SECRET_SUBDIR, "oem")
    mount.mkdir(parents=True)
    (mount / "slic.bin").write_bytes(b"SLIC-BODY")
    assert acpi_tables(_vmi({"slicNameRef": "oem"}), ctx) == (("slic", mount / "slic.bin"),)
    assert acpi_tables(_vmi(None), ctx) == ()


def test_a_secret_without_the_key_names_the_field(tmp_path: Path) -> None:
    """The Secret's mount lacks slic.bin: DiskFailure naming firmware.acpi.slicNameRef."""
    ctx = _ctx(tmp_path)
    ctx.config_mount_of(podlayout.SECRET_SUBDIR, "oem").mkdir(parents=True)
    with pytest.raises(DiskFailure, match=r"firmware\.acpi\.slicNameRef.*'slic\.bin'"):
        acpi_tables(_vmi({"slicNameRef": "oem"}), ctx)


def test_the_table_is_in_os_and_libvirt_accepts_it(tmp_path: Path) -> None:
    """`<os><acpi><table type='slic'>file</table></acpi></os>`, valid for libvirt's schema."""
    table = tmp_path / "slic.bin"
    xml = build(dataclasses.replace(PLAN, acpi_tables=(("slic", table),)))
    found = ET.fromstring(xml).find("os/acpi/table")
    assert found is not None and found.get("type") == "slic" and found.text == str(table)
    path = tmp_path / "domain.xml"
    path.write_text(xml)
    result = subprocess.run(
        ["virt-xml-validate", str(path), "domain"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert ET.fromstring(build(PLAN)).find("os/acpi") is None
