"""devices.filesystems in the domain XML (launcher/virtiofs.py): a <filesystem> with the
virtiofs driver (queue 1024) on its virtiofsd's socket, tagged with the filesystem's name;
guest memory shared (memfd, or the hugepages asked for); libvirt's schema accepts it. The
start waits for each virtiofsd's socket and fails naming the filesystem when none comes."""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from launcher import virtiofs
from launcher.domxml import build
from launcher.errors import DiskFailure
from launcher.pinning import PinningPlan
from launcher.virtiofs import FilesystemPlan
from shared.model import VirtualMachineInstance
from tests.unit.launcher.test_domxml import PLAN

SHARES = (
    FilesystemPlan(tag="cfg", socket=Path("/var/run/kubevirt/virtiofs-containers/cfg.sock")),
    FilesystemPlan(tag="data", socket=Path("/var/run/kubevirt/virtiofs-containers/data.sock")),
)


def _validate(tmp_path: Path, xml: str) -> None:
    path = tmp_path / "domain.xml"
    path.write_text(xml)
    done = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True)
    assert done.returncode == 0, done.stderr


def test_filesystems_and_shared_memfd_memory(tmp_path: Path) -> None:
    """Two shares → two <filesystem type='mount'> (driver virtiofs queue 1024, source
    socket, target dir = tag, alias ua-<tag>); <memoryBacking> memfd + access shared."""
    dom = ET.fromstring(build(dataclasses.replace(PLAN, filesystems=SHARES)))
    found = dom.findall("devices/filesystem")
    assert [f.get("type") for f in found] == ["mount", "mount"]
    cfg = found[0]
    driver = cfg.find("driver")
    assert driver is not None and driver.attrib == {"type": "virtiofs", "queue": "1024"}
    assert cfg.find("source").attrib == {"socket": str(SHARES[0].socket)}  # type: ignore[union-attr]
    assert cfg.find("target").attrib == {"dir": "cfg"}  # type: ignore[union-attr]
    assert cfg.find("alias").attrib == {"name": "ua-cfg"}  # type: ignore[union-attr]
    backing = dom.find("memoryBacking")
    assert backing is not None
    assert [(c.tag, c.attrib) for c in backing] == [
        ("source", {"type": "memfd"}),
        ("access", {"mode": "shared"}),
    ]
    _validate(tmp_path, build(dataclasses.replace(PLAN, filesystems=SHARES)))


def test_hugepages_backing_is_shared_not_replaced(tmp_path: Path) -> None:
    """With memory.hugepages the backing keeps its pages and only gains access shared."""
    plan = dataclasses.replace(PLAN, filesystems=SHARES[:1], pinning=PinningPlan(hugepage_kib=2048))
    xml = build(plan)
    backing = ET.fromstring(xml).find("memoryBacking")
    assert backing is not None
    assert [c.tag for c in backing] == ["hugepages", "access"]
    _validate(tmp_path, xml)


def test_no_filesystems_no_backing() -> None:
    """No filesystems: neither <filesystem> nor <memoryBacking>."""
    dom = ET.fromstring(build(PLAN))
    assert dom.find("devices/filesystem") is None and dom.find("memoryBacking") is None


def test_plans_follow_the_spec() -> None:
    """Each filesystems[] entry → its tag and its socket in the shared emptyDir."""
    vmi = VirtualMachineInstance.from_dict(
        {"metadata": {"name": "v"}, "spec": {"domain": {"devices": {
            "filesystems": [{"name": "cfg", "virtiofs": {}}, {"name": "data", "virtiofs": {}}]
        }}}}
    )  # fmt: skip
    assert virtiofs.plans(vmi) == SHARES


async def test_start_waits_for_the_socket(tmp_path: Path) -> None:
    """A listening socket: the wait returns at once."""
    path = tmp_path / "cfg.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        await virtiofs.wait_sockets((FilesystemPlan(tag="cfg", socket=path),), timeout=1)


async def test_no_virtiofsd_fails_naming_the_filesystem(tmp_path: Path) -> None:
    """No socket before the deadline: DiskFailure naming filesystems[1] and its container."""
    path = tmp_path / "cfg.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        shares = (
            FilesystemPlan(tag="cfg", socket=path),
            FilesystemPlan(tag="data", socket=tmp_path / "data.sock"),
        )
        with pytest.raises(DiskFailure, match=r"filesystems\[1\].*virtiofs-data"):
            await virtiofs.wait_sockets(shares, timeout=0.3)
