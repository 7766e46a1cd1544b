"""The vhostmd disk format (shared/vhostmddisk.py): 256 KiB, a `mvbd` header with the
body's checksum and length, the body after it; a busy flag or a bad checksum reads as
incomplete; a body past the bound is refused; an existing file is never overwritten."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shared import vhostmddisk


def test_a_new_disk_holds_empty_metrics(tmp_path: Path) -> None:
    """create: 256 KiB, the empty document readable."""
    path = tmp_path / "vhostmd0"
    vhostmddisk.create(path)
    assert path.stat().st_size == vhostmddisk.SIZE
    assert vhostmddisk.read(path.read_bytes()) == vhostmddisk.EMPTY_BODY
    with pytest.raises(FileExistsError):
        vhostmddisk.create(path)


def test_a_rewrite_replaces_the_body(tmp_path: Path) -> None:
    """write: the new body with its header; a shorter body reads back exactly."""
    path = tmp_path / "vhostmd0"
    vhostmddisk.create(path)
    fd = os.open(path, os.O_RDWR)
    try:
        vhostmddisk.write(fd, b"<metrics><metric/></metrics>\n" * 10)
        vhostmddisk.write(fd, b"<metrics>x</metrics>\n")
    finally:
        os.close(fd)
    data = path.read_bytes()
    assert data[:4] == b"mvbd"
    assert vhostmddisk.read(data) == b"<metrics>x</metrics>\n"


def test_busy_or_corrupt_disks_read_as_incomplete() -> None:
    """The busy flag set, a wrong checksum or a short read: None."""
    body = b"<metrics/>\n"
    good = vhostmddisk.header(body, busy=False) + body
    assert vhostmddisk.read(good) == body
    assert vhostmddisk.read(vhostmddisk.header(body, busy=True) + body) is None
    assert vhostmddisk.read(good[:-1] + b"!") is None
    assert vhostmddisk.read(good[:10]) is None


def test_a_body_past_the_bound_is_refused(tmp_path: Path) -> None:
    """More than SIZE - 24 bytes: BodyTooLarge, nothing written."""
    path = tmp_path / "vhostmd0"
    vhostmddisk.create(path)
    fd = os.open(path, os.O_RDWR)
    try:
        with pytest.raises(vhostmddisk.BodyTooLarge):
            vhostmddisk.write(fd, b"x" * (vhostmddisk.MAX_BODY + 1))
    finally:
        os.close(fd)
    assert vhostmddisk.read(path.read_bytes()) == vhostmddisk.EMPTY_BODY
