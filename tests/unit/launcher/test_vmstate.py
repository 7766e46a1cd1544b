"""Persistent TPM / EFI state in the launcher (launcher/vmstate.py): the NVRAM file is in
the state claim's mount, libvirt's per-domain swtpm dir is a link to the claim, the TPM is
tpm-tis with persistent_state='yes', the XML is libvirt-valid, and undefine keeps both;
the handler says such a VMI is not live-migratable, naming the claim."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import libvirt
import pytest

from handler.status import live_migratable
from launcher import domxml
from launcher.daemonpaths import DaemonPaths, Isolation
from launcher.errors import InvalidSpec
from launcher.plan import HostPaths, parse_vmi, plan_domain
from launcher.virt import Virt
from launcher.vmstate import link_tpm_state, promote_migrated_state
from shared.model import VirtualMachineInstance
from tests.integration.conformance.checks import lay_out_pod
from tests.unit.launcher.test_tpm import _vmi

UID = "11111111-2222-3333-4444-555555555555"
OWNER = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": "tiny",
         "uid": "vm-uid", "controller": True}  # fmt: skip


def _persistent_vmi(*, tpm: bool, efi: bool) -> dict[str, Any]:
    obj = _vmi({"persistent": True} if tpm else None)
    obj["metadata"]["ownerReferences"] = [OWNER]
    if efi:
        obj["spec"]["domain"]["firmware"] = {
            "bootloader": {"efi": {"persistent": True, "secureBoot": False}}
        }
    return obj


async def _xml(raw: dict[str, Any], root: Path, *, swtpm: Path | None) -> ET.Element:
    vmi = parse_vmi(raw)
    host = HostPaths(
        serial_log=root / "serial.log",
        console_socket=root / "console.sock",
        agent_socket=root / "agent.sock",
        partition=None,
        vm_state=root / "vm-state",
        swtpm_storage=swtpm,
    )
    (root / "vm-state").mkdir()
    plan = await plan_domain(vmi, ctx=lay_out_pod(vmi, root), host=host, virt_type="qemu")
    xml = domxml.build(plan)
    path = root / "domain.xml"
    path.write_text(xml)
    done = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return ET.fromstring(xml)


async def test_persistent_tpm_links_libvirts_swtpm_dir_to_the_claim(tmp_path: Path) -> None:
    """tpm.persistent: tpm-tis with persistent_state='yes', and libvirt's
    `<swtpm dir>/<domain uuid>` is a link to the claim's swtpm dir; a second start (a new
    launcher, same claim) links again to the same dir."""
    swtpm = tmp_path / "lib" / "swtpm"
    dom = await _xml(_persistent_vmi(tpm=True, efi=False), tmp_path, swtpm=swtpm)
    (tpm,) = dom.findall("devices/tpm")
    assert tpm.get("model") == "tpm-tis"
    backend = tpm.find("backend")
    assert backend is not None and backend.attrib == {
        "type": "emulator", "version": "2.0", "persistent_state": "yes"
    }  # fmt: skip
    link = swtpm / UID
    assert link.is_symlink() and link.resolve() == (tmp_path / "vm-state" / "swtpm").resolve()
    (tmp_path / "vm-state" / "swtpm" / "tpm2").mkdir()  # what swtpm_setup left
    link.unlink()
    link.symlink_to(tmp_path)  # a stale link from elsewhere is replaced
    vmi = parse_vmi(_persistent_vmi(tpm=True, efi=False))
    assert link_tpm_state(vmi, state_dir=tmp_path / "vm-state", swtpm_storage=swtpm, uuid=UID)
    assert (link / "tpm2").is_dir()
    assert dom.find("os/nvram") is None


async def test_persistent_efi_keeps_its_nvram_in_the_claim(tmp_path: Path) -> None:
    """efi.persistent: `<nvram>` is the claim's nvram/efi-vars.fd (its dir made), with
    OVMF's vars file as the template libvirt copies from when it is absent."""
    dom = await _xml(_persistent_vmi(tpm=False, efi=True), tmp_path, swtpm=None)
    nvram = dom.find("os/nvram")
    assert nvram is not None
    assert nvram.text == str(tmp_path / "vm-state" / "nvram" / "efi-vars.fd")
    assert nvram.get("template") == "/usr/share/OVMF/OVMF_VARS_4M.fd"
    assert (tmp_path / "vm-state" / "nvram").is_dir()
    assert dom.findall("devices/tpm") == []


async def test_non_persistent_state_stays_in_the_pod(tmp_path: Path) -> None:
    """Without persistent: tpm-tis without persistent_state, the NVRAM in the private
    disk dir, nothing in the claim's dir."""
    raw = _vmi({})
    raw["spec"]["domain"]["firmware"] = {"bootloader": {"efi": {"secureBoot": False}}}
    dom = await _xml(raw, tmp_path, swtpm=tmp_path / "swtpm")
    (tpm,) = dom.findall("devices/tpm")
    backend = tpm.find("backend")
    assert tpm.get("model") == "tpm-tis" and backend is not None
    assert "persistent_state" not in backend.attrib
    nvram = dom.find("os/nvram")
    assert nvram is not None and "vm-state" not in (nvram.text or "")
    assert list((tmp_path / "vm-state").iterdir()) == []


async def test_a_persistent_tpm_without_a_swtpm_dir_is_refused(tmp_path: Path) -> None:
    """A launcher that knows no swtpm dir refuses the VMI, naming the field."""
    with pytest.raises(InvalidSpec, match=r"spec.domain.devices.tpm.persistent"):
        await _xml(_persistent_vmi(tpm=True, efi=False), tmp_path, swtpm=None)


@pytest.mark.parametrize(
    ("isolation", "path"),
    [
        pytest.param(Isolation.MOUNT_NAMESPACE, "lib/swtpm", id="namespace"),
        pytest.param(Isolation.SESSION, "xdg/config/libvirt/qemu/swtpm", id="session"),
    ],
)
def test_swtpm_storage_is_libvirts_dir_for_the_daemon(
    tmp_path: Path, isolation: Isolation, path: str
) -> None:
    """The system daemon's /var/lib/libvirt/swtpm (a private subdir in a namespace), a
    session daemon's $XDG_CONFIG_HOME/libvirt/qemu/swtpm."""
    assert DaemonPaths(root=tmp_path, isolation=isolation).swtpm_storage == tmp_path / path


def _with_state_status(raw: dict[str, Any], modes: list[str] | None) -> dict[str, Any]:
    if modes is not None:
        info = {"claimName": "persistent-state-for-tiny", "accessModes": modes}
        raw["status"] = {"volumeStatus": [{"name": "persistent-state-for-tiny", "target": "",
                                           "persistentVolumeClaimInfo": info}]}  # fmt: skip
    return raw


@pytest.mark.parametrize(
    ("tpm", "efi", "modes", "status", "text"),
    [
        pytest.param(
            True,
            False,
            None,
            "False",
            "Unable to determine if PVC persistent-state-for-tiny is shared",
            id="tpm-unknown",
        ),
        pytest.param(
            True,
            True,
            ["ReadWriteOnce"],
            "False",
            "PVC persistent-state-for-tiny is not shared (ReadWriteOnce)",
            id="both-rwo",
        ),
        pytest.param(False, True, ["ReadWriteMany"], "True", "", id="efi-rwx"),
        pytest.param(True, False, ["ReadWriteMany"], "True", "", id="tpm-rwx"),
    ],
)
def test_persistent_state_migrates_only_on_a_shared_claim(
    tpm: bool, efi: bool, modes: list[str] | None, status: str, text: str
) -> None:
    """As KubeVirt: the state claim (its volumeStatus entry) must be ReadWriteMany, else
    LiveMigratable=False (DisksNotLiveMigratable) naming it."""
    raw = _with_state_status(_persistent_vmi(tpm=tpm, efi=efi), modes)
    cond = live_migratable(VirtualMachineInstance.from_dict(raw))
    assert cond.status == status
    if status == "False":
        assert cond.reason == "DisksNotLiveMigratable" and text in (cond.message or "")


def test_a_migration_target_gets_its_own_tpm_dir_made_current_once_it_owns_the_vm(
    tmp_path: Path,
) -> None:
    """A first start makes swtpm-<id> current (the claim's swtpm link); a migration target
    links libvirt to a new dir (the source's swtpm holds the current one locked) and
    promotes it once the domain is its own; the next start reuses it and drops the old."""
    state, vmi = tmp_path / "state", parse_vmi(_persistent_vmi(tpm=True, efi=False))
    state.mkdir()
    source, target = tmp_path / "source", tmp_path / "target"
    assert link_tpm_state(vmi, state_dir=state, swtpm_storage=source, uuid=UID)
    first = (state / "swtpm").resolve()
    assert first.name.startswith("swtpm-") and (source / UID).resolve() == first
    assert link_tpm_state(vmi, state_dir=state, swtpm_storage=target, uuid=UID, incoming=True)
    moved = (target / UID).resolve()
    assert moved != first and (state / "swtpm").resolve() == first
    promote_migrated_state(vmi, state_dir=state, swtpm_storage=target)
    assert (state / "swtpm").resolve() == moved
    again = tmp_path / "again"
    assert link_tpm_state(vmi, state_dir=state, swtpm_storage=again, uuid=UID)
    assert (again / UID).resolve() == moved and not first.exists()


class _Domain:
    def __init__(self) -> None:
        self.flags: list[int] = []

    def undefineFlags(self, flags: int) -> int:
        self.flags.append(flags)
        return 0


class _Conn:
    def __init__(self) -> None:
        self.domain = _Domain()

    def lookupByName(self, name: str) -> _Domain:
        return self.domain


async def test_undefine_keeps_nvram_and_tpm_state() -> None:
    """Undefine passes KEEP_NVRAM and KEEP_TPM: the claim's files outlive the domain."""
    conn = _Conn()
    await Virt(conn, call_timeout=5).undefine("ns_tiny")
    assert conn.domain.flags == [
        libvirt.VIR_DOMAIN_UNDEFINE_KEEP_NVRAM | libvirt.VIR_DOMAIN_UNDEFINE_KEEP_TPM
    ]
