"""The local image store: where container images' files live on a machine without a runtime.

On a real node the launcher pod's containers carry containerDisk and kernelBoot images.
Locally, scripts register image contents here: a reference maps to
``<root>/<sha256(ref)[:16]>/rootfs/``, with the reference itself in a ``ref`` file.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath


class ImageStoreError(Exception):
    """Base class of image-store errors."""


class ImageNotInStore(ImageStoreError):
    def __init__(self, ref: str, root: Path) -> None:
        super().__init__(f"image {ref!r} is not in the local image store {root}")
        self.ref = ref


class PathOutsideImage(ImageStoreError):
    def __init__(self, ref: str, path: str) -> None:
        super().__init__(f"path {path!r} escapes image {ref!r}")


@dataclass(frozen=True, slots=True)
class ImageStore:
    root: Path

    def rootfs(self, ref: str) -> Path:
        """The image's root directory; ImageNotInStore when it was never registered."""
        entry = self.root / hashlib.sha256(ref.encode()).hexdigest()[:16]
        rootfs = entry / "rootfs"
        if not rootfs.is_dir() or (entry / "ref").read_text().strip() != ref:
            raise ImageNotInStore(ref, self.root)
        return rootfs

    def file(self, ref: str, path: str) -> Path:
        """A file inside the image, refusing paths that climb out of it."""
        rel = PurePosixPath(path)
        if ".." in rel.parts:
            raise PathOutsideImage(ref, path)
        rootfs = self.rootfs(ref)
        target = (rootfs / rel.relative_to(rel.anchor)).resolve()
        if not target.is_relative_to(rootfs.resolve()):
            raise PathOutsideImage(ref, path)
        if not target.is_file():
            raise ImageNotInStore(f"{ref}:{path}", self.root)
        return target

    def disk(self, ref: str, path: str | None) -> Path:
        """A containerDisk's image file: ``path`` if given, else the one file under /disk."""
        if path:
            return self.file(ref, path)
        disks = sorted(p for p in (self.rootfs(ref) / "disk").glob("*") if p.is_file())
        if len(disks) != 1:
            raise ImageNotInStore(
                f"{ref} (expected one file under /disk, found {len(disks)})", self.root
            )
        return disks[0]
