"""The guest platform on real QEMU: a guest boots through UEFI (OVMF) and through UEFI
secure boot with SMM, and cpu.model, virtio-rng and the SMBIOS identity reach QEMU.

The test guest's EFI path is its kernel as Debian ships it (/boot/vmlinuz.efi, a bzImage
with the EFI stub): QEMU hands it to OVMF through fw_cfg and OVMF starts it as an EFI
application. Without `quiet` the kernel's own lines show which firmware ran it. OVMF and
the EFI stub (which unpacks the kernel itself) need more memory than the PVH boot: in
128 MiB OVMF dies with an invalid-opcode exception, so the EFI guests get 256 MiB.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from shared.model._validate_firmware import TCG_CPU_MODELS
from shared.wire.launcher_api import Method
from tests.integration.launcher.harness import (
    BOOT_MARKER,
    Launcher,
    call,
    qemu_pids_under,
    tiny_vmi,
    wait_for,
)

pytestmark = pytest.mark.integration
Factory = Any
DOMAIN = "default_tiny"
UUID = "5d307ca9-b3ef-428c-8861-06e72d69f223"


def _efi_vmi(efi: dict[str, Any], **domain: Any) -> dict[str, Any]:
    vmi = tiny_vmi()
    spec_domain = vmi["spec"]["domain"]
    boot = spec_domain["firmware"]["kernelBoot"]
    boot["container"]["kernelPath"] = "/boot/vmlinuz.efi"
    boot["kernelArgs"] = "console=ttyS0 panic=-1"
    spec_domain["firmware"]["bootloader"] = {"efi": efi}
    spec_domain["memory"]["guest"] = spec_domain["resources"]["requests"]["memory"] = "256Mi"
    spec_domain.update(domain)
    return vmi


def _virsh(launcher: Launcher, *args: str) -> str:
    return launcher.virsh(*args).stdout


def _virsh_or_none(launcher: Launcher, *args: str) -> str | None:
    try:
        return _virsh(launcher, *args)
    except subprocess.CalledProcessError:
        return None


async def _boots(launcher: Launcher, *lines: str) -> None:
    await call(launcher, Method.SYNC, {"vmi": launcher.vmi})
    for line in (BOOT_MARKER, *lines):
        await wait_for(
            lambda line=line: line in launcher.serial(),
            timeout=120,
            what=f"{line!r} on the serial console",
            last=lambda: launcher.serial()[-2000:],
        )


async def test_efi_guest_boots_under_ovmf(launchers: Factory) -> None:
    """efi with secureBoot false: OVMF runs the kernel (its EFI stub and the kernel's
    "EFI ... by EDK II" line show it), the guest boots, and the VM's variable store is a
    file of its own in the launcher's private dir."""
    launcher = launchers(_efi_vmi({"secureBoot": False}))
    await _boots(launcher, "by EDK II")
    assert "Secure boot enabled" not in launcher.serial()
    xml = _virsh(launcher, "dumpxml", DOMAIN)
    assert "/usr/share/OVMF/OVMF_CODE_4M.fd" in xml
    assert (launcher.private / "disks" / "efi-vars.fd").is_file()


async def test_secure_boot_guest_boots_with_smm(launchers: Factory) -> None:
    """efi (secureBoot defaulting to true) with SMM on q35: the secure-boot OVMF with
    Microsoft's keys enrolled starts, the kernel reports secure boot enabled, the guest
    boots. (OVMF 2022.11 falls back to its legacy loader for a directly booted kernel it
    cannot verify, so this shows the platform, not a signature check of the kernel.)"""
    vmi = _efi_vmi({}, features={"smm": {"enabled": True}}, machine={"type": "q35"})
    launcher = launchers(vmi)
    await _boots(launcher, "Secure boot enabled")
    xml = _virsh(launcher, "dumpxml", DOMAIN)
    assert "OVMF_CODE_4M.secboot.fd" in xml and "secure='yes'" in xml
    assert "<smm state='on'/>" in xml


async def test_cpu_model_rng_and_smbios_reach_qemu(launchers: Factory) -> None:
    """A named CPU model, virtio-rng from /dev/urandom and firmware.uuid/serial are on
    QEMU's command line; the guest boots with them."""
    vmi = tiny_vmi()
    domain = vmi["spec"]["domain"]
    domain["cpu"]["model"] = "Westmere"
    domain["devices"]["rng"] = {}
    domain["firmware"].update(uuid=UUID, serial="SN-0001")
    launcher = launchers(vmi)
    await _boots(launcher)
    [pid] = qemu_pids_under(launcher.root)
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    assert re.search(r"-cpu Westmere\b", cmdline), cmdline
    assert "virtio-rng-pci" in cmdline and "/dev/urandom" in cmdline
    assert f"uuid={UUID}" in cmdline and "serial=SN-0001" in cmdline


async def test_host_model_boots_under_tcg(launchers: Factory) -> None:
    """host-model, which admission lets through under emulation, does start under TCG."""
    vmi = tiny_vmi()
    vmi["spec"]["domain"]["cpu"]["model"] = "host-model"
    launcher = launchers(vmi)
    await _boots(launcher)


async def test_tcg_cpu_model_list_matches_libvirt(launchers: Factory) -> None:
    """The models admission accepts under emulation are exactly those libvirt reports
    usable for TCG here, and libvirt does not offer host-passthrough to TCG."""
    launcher = launchers()
    # The command socket is served while libvirtd still starts (launcher/cmdsocket.py):
    # virsh, which goes to libvirtd directly, waits for it to answer.
    args = ("domcapabilities", "--virttype", "qemu", "--machine", "pc")
    caps = await wait_for(lambda: _virsh_or_none(launcher, *args), timeout=60,
                          what="libvirtd answering domcapabilities")  # fmt: skip
    usable = set(re.findall(r"<model usable='yes'[^>]*>([^<]+)</model>", caps))
    assert usable == TCG_CPU_MODELS
    assert "<mode name='host-passthrough' supported='no'/>" in caps
