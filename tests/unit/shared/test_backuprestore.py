"""The restore path (shared.backuprestore): a full backup and two incremental ones, made
as libvirt makes them (the incrementals hold only the changed clusters and name the live
disk as their backing file), restored by the generated script into a raw image that is
byte for byte the disk as it was at the last backup, with real qemu-img and qemu-io."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from shared.backuprestore import restore_script

MIB = 1 << 20


def run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


def write(image: Path, fmt: str, pattern: int, offset: int, size: int) -> None:
    run("qemu-io", "-f", fmt, "-c", f"write -P {pattern} {offset} {size}", str(image))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def incremental(live: Path, out: Path, writes: list[tuple[int, int, int]]) -> None:
    """An incremental backup as libvirt writes it: a qcow2 over the live disk's path with
    only the clusters written since the last checkpoint; the same writes land on live."""
    run("qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(live), str(out))
    for pattern, offset, size in writes:
        write(out, "qcow2", pattern, offset, size)
        write(live, "raw", pattern, offset, size)


def test_full_plus_incrementals_restore_byte_for_byte(tmp_path: Path) -> None:
    """full (16 MiB written) + inc1 (4 MiB) + inc2 (overwrites 1 MiB of inc1's, adds 2 MiB):
    the restored raw disk equals the live disk; the incrementals are far smaller than the
    full backup; the backups themselves are left untouched."""
    live = tmp_path / "live.img"
    run("qemu-img", "create", "-q", "-f", "raw", str(live), str(64 * MIB))
    write(live, "raw", 0x11, 0, 16 * MIB)
    for name in ("full", "inc1", "inc2"):
        (tmp_path / name).mkdir()
    full = tmp_path / "full" / "scratch.qcow2"
    run("qemu-img", "convert", "-O", "qcow2", str(live), str(full))
    incremental(live, tmp_path / "inc1" / "scratch.qcow2", [(0x22, 32 * MIB, 4 * MIB)])
    incremental(live, tmp_path / "inc2" / "scratch.qcow2",
                [(0x33, 33 * MIB, MIB), (0x44, 48 * MIB, 2 * MIB)])  # fmt: skip
    before = digest(tmp_path / "inc1" / "scratch.qcow2")
    script = restore_script(
        [str(tmp_path / n) for n in ("full", "inc1", "inc2")],
        volume="scratch",
        work_dir=str(tmp_path / "work"),
        output=str(tmp_path / "disk.img"),
    )
    subprocess.run(["sh", "-c", script], check=True, capture_output=True, timeout=120)
    assert digest(tmp_path / "disk.img") == digest(live)
    assert digest(tmp_path / "inc1" / "scratch.qcow2") == before
    inc1_size = (tmp_path / "inc1" / "scratch.qcow2").stat().st_size
    assert 4 * MIB <= inc1_size < full.stat().st_size


def test_a_restore_needs_the_full_backup() -> None:
    """No backup directory at all is refused."""
    with pytest.raises(ValueError, match="full backup"):
        restore_script([], volume="v", work_dir="/w", output="/o")


def test_a_full_copy_inside_a_chain_restarts_it(tmp_path: Path) -> None:
    """A raw disk is copied whole by every backup (no backing file): the restore takes the
    last copy alone, so a region zeroed since the first copy stays zero."""
    live = tmp_path / "live.img"
    run("qemu-img", "create", "-q", "-f", "raw", str(live), str(16 * MIB))
    write(live, "raw", 0x55, 0, 4 * MIB)
    for name in ("full", "inc1"):
        (tmp_path / name).mkdir()
    run("qemu-img", "convert", "-O", "qcow2", str(live), str(tmp_path / "full" / "data.qcow2"))
    run("qemu-io", "-f", "raw", "-c", f"write -z 0 {2 * MIB}", str(live))
    run("qemu-img", "convert", "-O", "qcow2", str(live), str(tmp_path / "inc1" / "data.qcow2"))
    script = restore_script(
        [str(tmp_path / "full"), str(tmp_path / "inc1")],
        volume="data",
        work_dir=str(tmp_path / "work"),
        output=str(tmp_path / "disk.img"),
    )
    subprocess.run(["sh", "-c", script], check=True, capture_output=True, timeout=120)
    assert digest(tmp_path / "disk.img") == digest(live)


def test_an_incremental_first_is_refused(tmp_path: Path) -> None:
    """A chain that starts with an incremental file fails, saying the full one comes first."""
    live = tmp_path / "live.img"
    run("qemu-img", "create", "-q", "-f", "raw", str(live), str(MIB))
    (tmp_path / "inc").mkdir()
    incremental(live, tmp_path / "inc" / "v.qcow2", [(0x11, 0, 4096)])
    script = restore_script([str(tmp_path / "inc")], volume="v", work_dir=str(tmp_path / "w"),
                            output=str(tmp_path / "o.img"))  # fmt: skip
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "full backup must come first" in done.stderr
