"""ephemeral and sysprep volumes (launcher/volumes): an ephemeral volume is a qcow2 overlay
in the scratch dir whose backing file is the claim's disk.img, never written; sysprep is
an ISO labelled unattendCD of the ConfigMap's or Secret's files, refused without an
answer file; a downwardMetrics volume is the vhostmd disk. Real qemu-img and
genisoimage."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from launcher.errors import DiskFailure
from shared import podlayout, vhostmddisk
from tests.unit.launcher.test_config_isos import _iso_files, _iso_label, _iso_read, _kubelet_volume
from tests.unit.launcher.test_volumes import _ctx, _mount, _resolve

EPHEMERAL = {"name": "data", "ephemeral": {"persistentVolumeClaim": {"claimName": "golden"}}}


def _info(path: Path) -> dict[str, object]:
    out = subprocess.run(
        ["qemu-img", "info", "--output=json", "-U", str(path)], check=True, capture_output=True
    )
    info: dict[str, object] = json.loads(out.stdout)
    return info


async def test_an_ephemeral_volume_is_an_overlay_over_the_claims_disk(tmp_path: Path) -> None:
    """The overlay is qcow2 in the work dir, writable, backed by the claim's disk.img
    (raw), which keeps its bytes; a second resolve reuses the overlay."""
    ctx = _ctx(tmp_path)
    disk = _mount(ctx, "data") / podlayout.PVC_DISK_FILE
    disk.write_bytes(b"KVPY-COUNT 41\n".ljust(1024 * 1024, b"\0"))
    resolved = await _resolve(ctx, EPHEMERAL)
    assert resolved.path.parent == ctx.work_dir
    assert (resolved.format, resolved.readonly, resolved.shared) == ("qcow2", False, False)
    assert resolved.created == (resolved.path,)
    info = _info(resolved.path)
    assert info["backing-filename"] == str(disk.resolve())
    assert info["backing-filename-format"] == "raw"
    assert info["virtual-size"] == 1024 * 1024
    again = await _resolve(ctx, EPHEMERAL)
    assert (again.path, again.created) == (resolved.path, ())
    assert disk.read_bytes()[:14] == b"KVPY-COUNT 41\n"


@pytest.mark.parametrize("mounted", [True, False], ids=["no-disk-img", "not-mounted"])
async def test_an_ephemeral_volume_never_makes_the_claims_disk(
    tmp_path: Path, mounted: bool
) -> None:
    """A claim without disk.img (or not mounted) fails the start, naming the field; no
    disk.img is made."""
    ctx = _ctx(tmp_path)
    if mounted:
        _mount(ctx, "data")
    with pytest.raises(DiskFailure, match=r"spec.volumes\[0\].ephemeral.persistentVolumeClaim"):
        await _resolve(ctx, EPHEMERAL)
    assert not (ctx.mount_of("data") / podlayout.PVC_DISK_FILE).exists()


@pytest.mark.parametrize(
    ("source", "answer"),
    [
        pytest.param({"configMap": {"name": "answers"}}, "autounattend.xml", id="config-map"),
        pytest.param({"secret": {"name": "answers"}}, "Unattend.xml", id="secret"),
    ],
)
async def test_a_sysprep_volume_is_an_unattend_cd(
    tmp_path: Path, source: dict[str, object], answer: str
) -> None:
    """The object's files (answer file and any other) on an ISO labelled unattendCD,
    raw and read-only; the kubelet's `..` entries are left out."""
    ctx = _ctx(tmp_path)
    files = {answer: "<unattend/>\n", "extra.txt": "x"}
    _kubelet_volume(ctx, podlayout.SYSPREP_SUBDIR, "win", files)
    resolved = await _resolve(ctx, {"name": "win", "sysprep": source})
    assert (resolved.format, resolved.readonly) == ("raw", True)
    assert _iso_label(resolved.path) == "unattendCD"
    assert _iso_files(resolved.path) == sorted([f"/{answer}", "/extra.txt"])
    assert _iso_read(resolved.path, f"/{answer}") == b"<unattend/>\n"


async def test_a_sysprep_volume_without_an_answer_file_fails_naming_it(tmp_path: Path) -> None:
    """Neither autounattend.xml nor unattend.xml: DiskFailure naming the field and volume."""
    ctx = _ctx(tmp_path)
    _kubelet_volume(ctx, podlayout.SYSPREP_SUBDIR, "win", {"other.xml": "<x/>"})
    with pytest.raises(DiskFailure, match=r"spec.volumes\[0\].sysprep.configMap: .*'win'"):
        await _resolve(ctx, {"name": "win", "sysprep": {"configMap": {"name": "answers"}}})


async def test_a_downward_metrics_volume_is_a_vhostmd_disk(tmp_path: Path) -> None:
    """downwardMetrics: the vhostmd disk made at <private>/downwardmetrics/vhostmd0 with
    empty metrics, raw and read-only; a second start reuses it."""
    ctx = _ctx(tmp_path)
    resolved = await _resolve(ctx, {"name": "metrics", "downwardMetrics": {}})
    assert resolved.path == ctx.vmi_disks.parent / "downwardmetrics" / "vhostmd0"
    assert (resolved.format, resolved.readonly, resolved.created) == ("raw", True, (resolved.path,))
    assert vhostmddisk.read(resolved.path.read_bytes()) == vhostmddisk.EMPTY_BODY
    again = await _resolve(ctx, {"name": "metrics", "downwardMetrics": {}})
    assert (again.path, again.created) == (resolved.path, ())
