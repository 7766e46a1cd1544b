"""The launcher's firmware choice: SeaBIOS unless efi, OVMF's plain or secure-boot pair,
the VM's own variable store, q35 for secure boot, and a clear error without OVMF."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from launcher.errors import InvalidSpec
from launcher.firmware import EFI_FIELD, NVRAM_FILE, OVMF, firmware_plan, machine_type
from shared.model import VirtualMachineInstance


def _vmi(domain: dict[str, Any]) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict({"metadata": {"name": "v"}, "spec": {"domain": domain}})


@pytest.fixture
def ovmf(tmp_path: Path) -> Path:
    for files in OVMF.values():
        (tmp_path / files.code).write_bytes(b"code")
        (tmp_path / files.vars_template).write_bytes(b"vars")
    return tmp_path


def test_bios_needs_nothing(ovmf: Path) -> None:
    """No bootloader, or bios: no firmware plan (QEMU's SeaBIOS), the q35 machine (the
    default when machine.type is unset, as KubeVirt)."""
    domains: tuple[dict[str, Any], ...] = ({}, {"firmware": {"bootloader": {"bios": {}}}})
    for domain in domains:
        vmi = _vmi(domain)
        assert firmware_plan(vmi, work_dir=Path("/w"), ovmf_dir=ovmf) is None
        assert machine_type(vmi) == "q35"


@pytest.mark.parametrize("secure", [True, False])
def test_efi_picks_the_ovmf_pair(ovmf: Path, secure: bool) -> None:
    """secureBoot picks the SMM-protected code and Microsoft's enrolled keys; otherwise the
    plain code and an empty store; the store is the VM's own file in its work dir."""
    vmi = _vmi({"firmware": {"bootloader": {"efi": {"secureBoot": secure}}}})
    plan = firmware_plan(vmi, work_dir=Path("/w"), ovmf_dir=ovmf)
    assert plan is not None
    assert plan.loader == ovmf / OVMF[secure].code
    assert plan.nvram_template == ovmf / OVMF[secure].vars_template
    assert plan.nvram == Path("/w") / NVRAM_FILE
    assert plan.secure is secure
    assert machine_type(vmi) == "q35"


def test_a_set_machine_type_wins() -> None:
    """machine.type set: used as it is."""
    vmi = _vmi({"machine": {"type": "pc-q35-7.2"}, "firmware": {"bootloader": {"efi": {}}}})
    assert machine_type(vmi) == "pc-q35-7.2"


def test_missing_ovmf_names_the_field(tmp_path: Path) -> None:
    """Without Debian's ovmf installed the start is refused, naming the efi field."""
    vmi = _vmi({"firmware": {"bootloader": {"efi": {}}}})
    with pytest.raises(InvalidSpec) as refused:
        firmware_plan(vmi, work_dir=tmp_path, ovmf_dir=tmp_path / "none")
    assert EFI_FIELD in str(refused.value)
