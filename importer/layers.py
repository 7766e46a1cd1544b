"""The containerDisk's one file under ``/disk/``, read out of an image's layers.

Layers are searched top (last) first; the first layer holding a regular file under
``disk/`` gives the disk (a lower layer's file would be hidden by it). Each layer is read
as a stream (tar, gzip-compressed or not) while its sha256 is computed; a layer whose
content does not match its digest fails the pull.
"""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import IO, Any

from importer.registry import PullError

CHUNK = 1024 * 1024


class DigestReader:
    """A file object that hashes what is read through it."""

    def __init__(self, raw: IO[bytes], digest: str) -> None:
        algo, _, self._want = digest.partition(":")
        if algo != "sha256":
            raise PullError(f"unsupported digest algorithm in {digest!r}")
        self._raw = raw
        self._hash = hashlib.sha256()
        self.digest = digest

    def read(self, n: int = -1) -> bytes:
        data = self._raw.read(n)
        self._hash.update(data)
        return data

    def verify(self) -> None:
        """Read what is left, then compare the digests."""
        while self.read(CHUNK):
            pass
        if self._hash.hexdigest() != self._want:
            raise PullError(f"layer {self.digest}: content does not match its digest")


def disk_member(member: tarfile.TarInfo) -> bool:
    """A regular file directly under ``disk/`` (``./disk/x`` or ``disk/x``)."""
    parts = PurePosixPath(_inside(member.name) or ".").parts
    return member.isfile() and len(parts) == 2 and parts[0] == "disk"


def _inside(name: str) -> str:
    return name.removeprefix("./").lstrip("/")


def extract_disk(
    layers: list[dict[str, Any]], *, open_blob: Callable[[str], IO[bytes]], out: Path
) -> str:
    """Write the image's disk to ``out``; returns its path inside the image."""
    for layer in reversed(layers):
        digest = str(layer.get("digest") or "")
        media = str(layer.get("mediaType") or "")
        if "zstd" in media:
            raise PullError(f"layer {digest}: zstd-compressed layers are not supported")
        with open_blob(digest) as raw:
            reader = DigestReader(raw, digest)
            found = _copy_disk(reader, out)
            reader.verify()
        if found is not None:
            return found
    raise PullError("the image has no file under /disk/ (not a containerDisk)")


def _copy_disk(reader: DigestReader, out: Path) -> str | None:
    try:
        with tarfile.open(fileobj=reader, mode="r|*") as tar:  # type: ignore[call-overload]
            for member in tar:
                if not disk_member(member):
                    continue
                source = tar.extractfile(member)
                if source is None:
                    continue
                out.parent.mkdir(parents=True, exist_ok=True)
                with out.open("wb") as f:
                    shutil.copyfileobj(source, f, CHUNK)
                return "/" + _inside(member.name)
    except tarfile.TarError as e:
        raise PullError(f"layer {reader.digest}: not a tar archive: {e}") from None
    return None
