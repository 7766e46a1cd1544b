"""The vhostmd metrics disk a downwardMetrics volume is (vm-dump-metrics reads it in the
guest): 256 KiB; a 16-byte big-endian header (signature `mvbd`, a busy flag, the sum of the
body's bytes, the body's length), then the XML body. A writer sets the flag, writes the
body, then clears it, so a reader that sees the flag set reads again. The launcher makes
the disk (empty metrics); the handler rewrites it from the node.
"""

from __future__ import annotations

import os
import struct

SIZE = 262144
HEADER = struct.Struct(">4siii")
SIGNATURE = b"mvbd"
MAX_BODY = SIZE - 24  # KubeVirt's bound
EMPTY_BODY = b"<metrics></metrics>\n"


class BodyTooLarge(ValueError):
    """The metrics document does not fit the disk."""


def header(body: bytes, *, busy: bool) -> bytes:
    """The header for `body`, flagged busy while the body is being written."""
    checksum = sum(body) & 0x7FFFFFFF
    return HEADER.pack(SIGNATURE, 1 if busy else 0, checksum, len(body))


def write(fd: int, body: bytes) -> None:
    """Rewrite the disk open at `fd` with `body`: flag, body, unflag (each synced)."""
    if len(body) > MAX_BODY:
        raise BodyTooLarge(f"metrics of {len(body)} bytes, more than {MAX_BODY}")
    os.pwrite(fd, header(body, busy=True), 0)
    os.fsync(fd)
    os.pwrite(fd, body, HEADER.size)
    os.pwrite(fd, header(body, busy=False), 0)
    os.fsync(fd)


def create(path: os.PathLike[str], *, mode: int = 0o644) -> None:
    """A new disk at `path` (never over an existing file) holding empty metrics."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.ftruncate(fd, SIZE)
        write(fd, EMPTY_BODY)
    finally:
        os.close(fd)


def read(data: bytes) -> bytes | None:
    """The body of a disk's bytes when complete and intact, else None."""
    if len(data) < HEADER.size:
        return None
    signature, busy, checksum, length = HEADER.unpack_from(data)
    body = data[HEADER.size : HEADER.size + length]
    if signature != SIGNATURE or busy or len(body) != length:
        return None
    return body if sum(body) & 0x7FFFFFFF == checksum else None
