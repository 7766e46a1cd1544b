"""The local image store: where container images' files live on a machine without a runtime.

Test-bed only (the product never reads it): scripts/build-guest registers image contents
here, the process-mode node agent runs "data image" containers (containerDisk images,
which have no program of their own) chrooted into them, and harnesses that run a launcher
without a pod fill its container-disks directory from here as the pod's init containers
would. A reference maps to ``<root>/<sha256(ref)[:16]>/rootfs/``, with the reference
itself in a ``ref`` file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from shared import podlayout
from shared.model import VirtualMachineInstance


class ImageStoreError(Exception):
    """Base class of image-store errors."""


class ImageNotInStore(ImageStoreError):
    def __init__(self, ref: str, root: Path) -> None:
        super().__init__(f"image {ref!r} is not in the local image store {root}")
        self.ref = ref


class PathOutsideImage(ImageStoreError):
    def __init__(self, ref: str, path: str) -> None:
        super().__init__(f"path {path!r} escapes image {ref!r}")


def default_root(environ: Mapping[str, str]) -> Path:
    """$KUBEVIRT_PY_IMAGE_STORE, else <cache>/images (where scripts/build-guest registers)."""
    cache = Path(environ.get("KUBEVIRT_PY_CACHE", Path.home() / ".cache" / "kubevirt-py"))
    return Path(environ.get("KUBEVIRT_PY_IMAGE_STORE", cache / "images"))


@dataclass(frozen=True, slots=True)
class ImageStore:
    root: Path

    def rootfs(self, ref: str) -> Path:
        """The image's root directory; ImageNotInStore when it was never registered."""
        entry = self.root / hashlib.sha256(ref.encode()).hexdigest()[:16]
        rootfs = entry / "rootfs"
        try:
            registered = (entry / "ref").read_text().strip()
        except OSError:
            registered = ""
        if not rootfs.is_dir() or registered != ref:
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


def fill_container_disks(store: ImageStore, vmi: Mapping[str, Any], dest: Path) -> list[Path]:
    """Lay out ``dest`` as a launcher pod's init containers lay out its container-disks
    volume (shared/podlayout.py), for launchers run without a pod. Images missing from
    the store are skipped, as if their copy never happened; returns the files placed."""
    placed = []
    for find, rel in _copies(store, vmi):
        try:
            source = find()
        except ImageStoreError:
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        try:
            os.link(source, target)
        except OSError:
            shutil.copyfile(source, target)
        placed.append(target)
    return placed


def _copies(
    store: ImageStore, vmi: Mapping[str, Any]
) -> list[tuple[Callable[[], Path], PurePosixPath]]:
    """(how to find the file in the store, where it goes) for each file the pod copies."""
    spec = VirtualMachineInstance.from_dict(dict(vmi)).spec
    copies: list[tuple[Callable[[], Path], PurePosixPath]] = []
    for volume in spec.volumes:
        cd = volume.container_disk
        if cd is not None and volume.name:
            copies.append(
                (partial(store.disk, cd.image or "", cd.path), podlayout.disk_file(volume.name))
            )
    boot = spec.domain.kernel_boot
    c = boot.container if boot is not None else None
    if c is not None and c.kernel_path:
        copies.append((partial(store.file, c.image or "", c.kernel_path), podlayout.kernel_file()))
    if c is not None and c.initrd_path:
        copies.append((partial(store.file, c.image or "", c.initrd_path), podlayout.initrd_file()))
    return copies
