"""devices.tpm in the launcher: the planner asks for an emulated TPM 2.0 (tpm-tis, as
KubeVirt's converter for a non-persistent TPM), the XML is libvirt-valid and as reviewed,
and the private libvirtd runs swtpm as QEMU's user with its log in the private dir."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from launcher.daemonpaths import BINDS, DaemonPaths, Isolation
from launcher.domxml import DomainPlan, build
from launcher.libvirtd import qemu_conf
from tests.integration.conformance.checks import domain_xml
from tests.unit.launcher.test_domxml import PLAN
from tests.unit.virt_api.admission.test_defaults import demo_vmi

GOLDEN = Path(__file__).parent / "golden" / "tpm-domain.xml"
TPM_PLAN = dataclasses.replace(PLAN, machine="q35", tpm=True)


def test_matches_golden_file() -> None:
    """A TPM renders exactly as reviewed (regenerate with KVPY_REGOLD=1)."""
    xml = build(TPM_PLAN)
    if os.environ.get("KVPY_REGOLD"):
        GOLDEN.write_text(xml + "\n")
    assert xml + "\n" == GOLDEN.read_text()


@pytest.mark.parametrize(
    "plan",
    [pytest.param(TPM_PLAN, id="q35"), pytest.param(dataclasses.replace(TPM_PLAN, machine="pc"))],
)
def test_passes_virt_xml_validate(tmp_path: Path, plan: DomainPlan) -> None:
    """libvirt's own schema accepts the TPM device on q35 and pc."""
    path = tmp_path / "domain.xml"
    path.write_text(build(plan))
    result = subprocess.run(
        ["virt-xml-validate", str(path), "domain"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def _vmi(tpm: dict[str, Any] | None) -> dict[str, Any]:
    obj = demo_vmi()
    obj["metadata"]["uid"] = "11111111-2222-3333-4444-555555555555"
    devices: dict[str, Any] = {"disks": [{"name": "containerdisk", "disk": {"bus": "virtio"}}]}
    if tpm is not None:
        devices["tpm"] = tpm
    obj["spec"]["domain"]["devices"] = devices
    return obj


@pytest.mark.parametrize(
    ("tpm", "count"),
    [
        pytest.param({}, 1, id="empty"),
        pytest.param({"enabled": True}, 1, id="enabled"),
        pytest.param({"enabled": False}, 0, id="disabled"),
        pytest.param(None, 0, id="absent"),
    ],
)
async def test_the_planner_adds_one_tpm_when_enabled(
    tmp_path: Path, tpm: dict[str, Any] | None, count: int
) -> None:
    """`tpm: {}` (or enabled: true) gives one tpm-tis device with swtpm's TPM 2.0 backend;
    `enabled: false` or no tpm gives none."""
    _, xml = await domain_xml(_vmi(tpm), tmp_path)
    tpms = ET.fromstring(xml).findall("devices/tpm")
    assert len(tpms) == count
    for el in tpms:
        assert el.get("model") == "tpm-tis"
        backend = el.find("backend")
        assert backend is not None
        assert (backend.get("type"), backend.get("version")) == ("emulator", "2.0")


def test_root_daemons_run_swtpm_as_root_and_session_daemons_as_themselves() -> None:
    """System mode names root for swtpm as for QEMU; a session daemon names no user (it
    runs swtpm as itself, its state and log in its XDG dirs)."""
    root = qemu_conf(session=False, cgroups=True)
    assert 'swtpm_user = "root"' in root and 'swtpm_group = "root"' in root
    session = qemu_conf(session=True, cgroups=True)
    assert "swtpm_user" not in session and "swtpm_group" not in session
    assert "user =" not in session


def test_swtpm_logs_go_to_the_private_dir(tmp_path: Path) -> None:
    """In a mount namespace libvirt's fixed swtpm log dir is a bind of a private subdir."""
    assert ("swtpm-log", "/var/log/swtpm") in BINDS
    paths = DaemonPaths(root=tmp_path, isolation=Isolation.MOUNT_NAMESPACE)
    assert paths.system("swtpm-log") == tmp_path / "swtpm-log"
    session = DaemonPaths(root=tmp_path, isolation=Isolation.SESSION)
    assert session.system("swtpm-log").is_relative_to(tmp_path)
