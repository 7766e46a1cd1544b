"""The domain XML of the guest platform: UEFI (OVMF, secure boot with SMM), CPU models,
virtio-rng and the SMBIOS identity (system and chassis); golden output and libvirt's
schema for each."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from launcher.domxml import DomainPlan, FirmwarePlan, build
from shared.model.guestdevices import Chassis
from tests.unit.launcher.test_domxml import PLAN

GOLDEN = Path(__file__).parent / "golden" / "platform-domain.xml"
OVMF = Path("/usr/share/OVMF")

SECURE = FirmwarePlan(
    loader=OVMF / "OVMF_CODE_4M.secboot.fd",
    nvram=Path("/pod/disks/efi-vars.fd"),
    nvram_template=OVMF / "OVMF_VARS_4M.ms.fd",
    secure=True,
)
PLATFORM = dataclasses.replace(
    PLAN,
    machine="q35",
    firmware=SECURE,
    smm=True,
    cpu_model="Nehalem",
    rng=True,
    smbios_uuid="5d307ca9-b3ef-428c-8861-06e72d69f223",
    smbios_serial="SN-0001",
    smbios_chassis=(("manufacturer", "Example Corp"), ("serial", "CH-0001"), ("sku", "rack-1")),
)


def test_matches_golden_file() -> None:
    """Secure boot, SMM, a named CPU, rng and SMBIOS render exactly as reviewed
    (regenerate with KVPY_REGOLD=1)."""
    xml = build(PLATFORM)
    if os.environ.get("KVPY_REGOLD"):
        GOLDEN.write_text(xml + "\n")
    assert xml + "\n" == GOLDEN.read_text()


VARIANTS = [
    pytest.param(PLATFORM, id="everything"),
    pytest.param(
        dataclasses.replace(
            PLAN,
            firmware=dataclasses.replace(
                SECURE,
                loader=OVMF / "OVMF_CODE_4M.fd",
                nvram_template=OVMF / "OVMF_VARS_4M.fd",
                secure=False,
            ),
        ),
        id="efi-on-pc",
    ),
    pytest.param(dataclasses.replace(PLAN, cpu_model="host-model"), id="host-model"),
    pytest.param(
        dataclasses.replace(PLAN, virt_type="kvm", cpu_model="host-passthrough"),
        id="host-passthrough",
    ),
    pytest.param(dataclasses.replace(PLAN, smbios_serial="only a serial"), id="serial-only"),
    pytest.param(dataclasses.replace(PLAN, smm=True, rng=True), id="smm-rng-bios"),
    pytest.param(
        dataclasses.replace(PLAN, smbios_chassis=(("asset", "A-1"), ("version", "2"))),
        id="chassis-only",
    ),
]


@pytest.mark.parametrize("plan", VARIANTS)
def test_passes_virt_xml_validate(tmp_path: Path, plan: DomainPlan) -> None:
    """libvirt's own schema accepts every platform variant."""
    path = tmp_path / "domain.xml"
    path.write_text(build(plan))
    result = subprocess.run(
        ["virt-xml-validate", str(path), "domain"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_firmware_uuid_is_the_domain_uuid_and_the_vmi_uid_stays_in_metadata() -> None:
    """firmware.uuid becomes <uuid> and the SMBIOS uuid (libvirt wants them equal); the
    VMI's UID is still the one in the kubevirt metadata."""
    root = ET.fromstring(build(PLATFORM))
    assert root.findtext("uuid") == PLATFORM.smbios_uuid
    assert root.findtext("sysinfo/system/entry[@name='uuid']") == PLATFORM.smbios_uuid
    assert root.findtext("sysinfo/system/entry[@name='serial']") == "SN-0001"
    assert root.find("os/smbios").get("mode") == "sysinfo"  # type: ignore[union-attr]
    uid = root.findtext("metadata/{http://kubevirt.io}kubevirt/{http://kubevirt.io}uid")
    assert uid == PLAN.uuid
    plain = ET.fromstring(build(PLAN))
    assert plain.findtext("uuid") == PLAN.uuid and plain.find("sysinfo") is None


@pytest.mark.parametrize(
    ("virt_type", "model", "mode", "named"),
    [
        pytest.param("qemu", None, None, None, id="tcg-default"),
        pytest.param("kvm", None, "host-model", None, id="kvm-default"),
        pytest.param("qemu", "host-model", "host-model", None, id="host-model"),
        pytest.param("kvm", "host-passthrough", "host-passthrough", None, id="passthrough"),
        pytest.param("qemu", "Westmere", "custom", "Westmere", id="named"),
    ],
)
def test_cpu_modes(virt_type: str, model: str | None, mode: str | None, named: str | None) -> None:
    """cpu.model maps to libvirt's CPU mode; a named model is exact, with no fallback."""
    plan = dataclasses.replace(PLAN, virt_type=virt_type, cpu_model=model)
    cpu = ET.fromstring(build(plan)).find("cpu")
    assert cpu is not None and cpu.get("mode") == mode
    assert cpu.findtext("model") == named
    if named:
        assert cpu.find("model").get("fallback") == "forbid"  # type: ignore[union-attr]


def test_secure_boot_has_smm_and_a_secure_loader() -> None:
    """Secure boot: the loader is secure and read-only pflash, the store is the VM's own
    copy of the template, and SMM is on."""
    root = ET.fromstring(build(PLATFORM))
    loader = root.find("os/loader")
    assert loader is not None and loader.text == str(SECURE.loader)
    assert (loader.get("secure"), loader.get("readonly"), loader.get("type")) == (
        "yes",
        "yes",
        "pflash",
    )
    nvram = root.find("os/nvram")
    assert nvram is not None and nvram.text == str(SECURE.nvram)
    assert nvram.get("template") == str(SECURE.nvram_template)
    assert root.find("features/smm").get("state") == "on"  # type: ignore[union-attr]
    rng = root.find("devices/rng")
    assert rng is not None and rng.findtext("backend") == "/dev/urandom"


def test_chassis_entries_follow_the_spec() -> None:
    """domain.chassis becomes SMBIOS type 3 entries, only the fields set, in libvirt's order;
    no chassis and no firmware identity: no <sysinfo> at all."""
    chassis = Chassis.from_dict({"sku": "s", "manufacturer": "m", "asset": ""})
    assert chassis.entries() == (("manufacturer", "m"), ("sku", "s"))
    root = ET.fromstring(build(dataclasses.replace(PLAN, smbios_chassis=chassis.entries())))
    entries = [(e.get("name"), e.text) for e in root.iterfind("sysinfo/chassis/entry")]
    assert entries == [("manufacturer", "m"), ("sku", "s")]
    assert root.find("sysinfo/system") is None
    assert root.find("os/smbios").get("mode") == "sysinfo"  # type: ignore[union-attr]
    assert ET.fromstring(build(PLAN)).find("sysinfo") is None
