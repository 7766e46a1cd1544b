"""What the domain XML asks of QEMU beyond libvirt 9.0's schema (launcher/qemuns.py): a
disk's discardGranularity as a `<qemu:override>` of its frontend, Hyper-V tlbflush's direct
and extended modes as `-global` CPU properties; golden output and libvirt's schema."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from launcher.diskxml import BlockIO, DiskOptions
from launcher.domxml import DomainPlan, build
from launcher.guestplan import guest_extras, tlbflush_properties
from launcher.passt import PasstInterface
from launcher.qemuns import QEMU_NS
from shared.model import VirtualMachineInstance
from shared.model.features import FeatureHyperv
from tests.unit.launcher.test_domxml import PLAN

GOLDEN = Path(__file__).parent / "golden" / "hyperv-tlbflush-domain.xml"
TLBFLUSH_MODES: dict[str, Any] = {"tlbflush": {"direct": {}, "extended": {}}}


def _plan(hyperv: dict[str, Any], **changes: Any) -> DomainPlan:
    vmi = VirtualMachineInstance.from_dict(
        {"metadata": {"name": "v", "namespace": "default"},
         "spec": {"domain": {"features": {"hyperv": hyperv}}}}
    )  # fmt: skip
    return dataclasses.replace(PLAN, virt_type="kvm", extras=guest_extras(vmi), **changes)


def _validate(tmp_path: Path, xml: str) -> None:
    path = tmp_path / "domain.xml"
    path.write_text(xml)
    result = subprocess.run(
        ["virt-xml-validate", str(path), "domain"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def _args(xml: str) -> list[str]:
    return [str(a.get("value")) for a in ET.fromstring(xml).iter(f"{{{QEMU_NS}}}arg")]


def test_tlbflush_modes_match_golden_file(tmp_path: Path) -> None:
    """tlbflush with direct and extended: <tlbflush state='on'/>, vpindex and vapic (their
    dependencies) on, and both CPU properties as -global, as reviewed (KVPY_REGOLD=1
    regenerates); libvirt's schema accepts it."""
    xml = build(_plan(TLBFLUSH_MODES))
    if os.environ.get("KVPY_REGOLD"):
        GOLDEN.write_text(xml + "\n")
    assert xml + "\n" == GOLDEN.read_text()
    _validate(tmp_path, xml)
    assert _args(xml) == [
        "-global", "x86_64-cpu.hv-tlbflush-direct=on", "-global", "x86_64-cpu.hv-tlbflush-ext=on"
    ]  # fmt: skip
    hyperv = ET.fromstring(xml).find("features/hyperv")
    assert hyperv is not None
    assert {el.tag for el in hyperv} == {"vapic", "vpindex", "tlbflush"}


@pytest.mark.parametrize(
    ("hyperv", "properties"),
    [
        pytest.param({"tlbflush": {}}, (), id="tlbflush-alone"),
        pytest.param({"tlbflush": {"direct": {}}}, ("hv-tlbflush-direct",), id="direct"),
        pytest.param({"tlbflush": {"extended": {}}}, ("hv-tlbflush-ext",), id="extended"),
        pytest.param({"tlbflush": {"direct": {"enabled": False}, "extended": {}}},
                     ("hv-tlbflush-ext",), id="direct-off"),
        pytest.param({"tlbflush": {"enabled": False, "direct": {}}}, (), id="tlbflush-off"),
        pytest.param({"relaxed": {}}, (), id="no-tlbflush"),
    ],
)  # fmt: skip
def test_tlbflush_properties_of_enabled_modes(
    hyperv: dict[str, Any], properties: tuple[str, ...]
) -> None:
    """Only the enabled modes of an enabled tlbflush become CPU properties."""
    assert tlbflush_properties(FeatureHyperv.from_dict(hyperv)) == properties


def test_direct_with_vapic_set_renders_it_once() -> None:
    """direct enables an unset vapic; a vapic set (on) is rendered as written, once."""
    xml = build(_plan({"vapic": {}, "tlbflush": {"direct": {}}}))
    hyperv = ET.fromstring(xml).find("features/hyperv")
    assert hyperv is not None
    assert [el.tag for el in hyperv].count("vapic") == 1


def test_one_commandline_beside_passt(tmp_path: Path) -> None:
    """With a passt interface (its own -netdev/-device arguments) the CPU properties join
    the domain's one <qemu:commandline>; libvirt's schema accepts it."""
    passt = PasstInterface(alias="p", socket=tmp_path / "p.sock", mac="02:00:00:00:00:09")
    xml = build(_plan(TLBFLUSH_MODES, passt=(passt,)))
    _validate(tmp_path, xml)
    assert len(ET.fromstring(xml).findall(f"{{{QEMU_NS}}}commandline")) == 1
    args = _args(xml)
    assert args[0] == "-netdev" and args[-2:] == ["-global", "x86_64-cpu.hv-tlbflush-ext=on"]


def test_discard_granularity_overrides_the_disk_frontend(tmp_path: Path) -> None:
    """A disk with a discard granularity gets one <qemu:device> by its alias with the
    unsigned discard_granularity property; disks without get none; schema-valid."""
    disks = (
        dataclasses.replace(
            PLAN.disks[0],
            options=DiskOptions(blockio=BlockIO(logical=512, physical=4096), discard_granularity=0),
        ),
        *PLAN.disks[1:],
    )
    xml = build(dataclasses.replace(PLAN, disks=disks))
    _validate(tmp_path, xml)
    devices = ET.fromstring(xml).findall(f"{{{QEMU_NS}}}override/{{{QEMU_NS}}}device")
    assert [d.get("alias") for d in devices] == [f"ua-{PLAN.disks[0].alias}"]
    prop = devices[0].find(f"{{{QEMU_NS}}}frontend/{{{QEMU_NS}}}property")
    assert prop is not None
    assert (prop.get("name"), prop.get("type"), prop.get("value")) == (
        "discard_granularity", "unsigned", "0"
    )  # fmt: skip
    assert ET.fromstring(build(PLAN)).find(f"{{{QEMU_NS}}}override") is None
