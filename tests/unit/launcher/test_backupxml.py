"""The backup and checkpoint XML: which live disks are backed up, qcow2 disks tracked by a
bitmap and copied incrementally, raw ones copied in full and left out of the checkpoint;
golden files, and libvirt's own schemas (virt-xml-validate) accept both documents."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from launcher.backupxml import (
    BackupDisk,
    backup_disks,
    backup_xml,
    checkpoint_xml,
    target_file,
    untracked,
)

GOLDEN = Path(__file__).parent / "golden"
DOMAIN = """<domain type='qemu'><devices>
  <disk type='file' device='disk'><driver name='qemu' type='qcow2'/>
    <source file='/var/run/kubevirt-private/containerdisk-overlay.qcow2'/>
    <target dev='vda' bus='virtio'/><alias name='ua-containerdisk'/></disk>
  <disk type='file' device='disk'><driver name='qemu' type='raw'/>
    <source file='/var/run/kubevirt-private/vmi-disks/data/disk.img'/>
    <target dev='vdb' bus='virtio'/><alias name='ua-data'/></disk>
  <disk type='block' device='disk'><driver name='qemu' type='raw'/>
    <source dev='/dev/blockdata'/><target dev='vdc' bus='virtio'/><alias name='ua-blockdata'/></disk>
  <disk type='file' device='disk'><driver name='qemu' type='qcow2'/>
    <source file='/var/run/kubevirt-private/scratch-empty.qcow2'/>
    <target dev='vdd' bus='virtio'/><alias name='ua-scratch'/></disk>
  <disk type='file' device='disk'><driver name='qemu' type='raw'/>
    <source file='/var/run/kubevirt-private/cloudinit.iso'/><target dev='vde' bus='virtio'/>
    <readonly/><alias name='ua-cloudinit'/></disk>
  <disk type='file' device='cdrom'><driver name='qemu' type='raw'/>
    <source file='/iso'/><target dev='sda' bus='sata'/><alias name='ua-cd'/></disk>
  <disk type='file' device='disk'><driver name='qemu' type='raw'/>
    <source file='/x'/><target dev='vdf' bus='virtio'/><alias name='libvirt-own'/></disk>
</devices></domain>"""
TARGET = "/var/run/kubevirt-private/hotplug-disks/backup-b1"


def disks() -> list[BackupDisk]:
    return list(backup_disks(DOMAIN))


def test_writable_disks_of_ours_are_backed_up_and_qcow2_ones_tracked() -> None:
    """Read-only disks, CD-ROMs and disks without our alias are left out; qcow2 disks carry
    a bitmap, raw files and block devices do not (copied in full every time)."""
    found = {d.volume: d for d in disks()}
    assert list(found) == ["containerdisk", "data", "blockdata", "scratch"]
    assert [v for v, d in found.items() if d.tracked] == ["containerdisk", "scratch"]
    assert untracked(disks()) == ["data", "blockdata"]
    assert found["blockdata"].block
    assert target_file(TARGET, found["data"]) == f"{TARGET}/data.qcow2"


@pytest.mark.parametrize(
    ("incremental", "golden"),
    [
        pytest.param(None, "backup-full.xml", id="full"),
        pytest.param("t-20261129T143000", "backup-incremental.xml", id="incremental"),
    ],
)
def test_backup_xml_matches_golden_and_libvirts_schema(
    incremental: str | None, golden: str, tmp_path: Path
) -> None:
    """A full backup copies every disk in full; an incremental one copies the tracked disks
    from the base checkpoint and the raw ones in full; both validate as domainbackup."""
    xml = backup_xml(disks(), target_dir=TARGET, incremental=incremental)
    if os.environ.get("UPDATE_GOLDEN"):
        (GOLDEN / golden).write_text(xml)
    assert xml == (GOLDEN / golden).read_text()
    _validate(tmp_path, xml, "domainbackup")


def test_checkpoint_xml_matches_golden_and_libvirts_schema(tmp_path: Path) -> None:
    """The checkpoint names a bitmap on each tracked disk and excludes the raw ones."""
    xml = checkpoint_xml("t-20261129T143000", disks())
    if os.environ.get("UPDATE_GOLDEN"):
        (GOLDEN / "checkpoint.xml").write_text(xml)
    assert xml == (GOLDEN / "checkpoint.xml").read_text()
    _validate(tmp_path, xml, "domaincheckpoint")


def _validate(tmp_path: Path, xml: str, schema: str) -> None:
    path = tmp_path / f"{schema}.xml"
    path.write_text(xml)
    done = subprocess.run(["virt-xml-validate", str(path), schema],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
