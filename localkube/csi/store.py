"""The driver's volumes and snapshots on one host directory every node sees.

Layout under the root (``<nodes dir>/_csi`` in the local cluster; both nodes' mount
namespaces see it at the same path, which is what makes ReadWriteMany work here):

- ``volumes/<id>/meta.json`` and either ``data/`` (a filesystem volume: a directory) or
  ``disk.raw`` (a block volume: a sparse file the node exposes as a loop device);
- ``snapshots/<id>/meta.json`` and a copy of the volume's ``data/`` or ``disk.raw``.

Ids are the names the sidecars give (``pvc-<uid>``, ``snapshot-<uid>``), so every call is
idempotent by name. Objects appear by an atomic rename of a finished temporary directory.
Filesystem volumes do not enforce their capacity (a directory has none); block volumes are
exactly their capacity.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

from localkube.csi.errors import Code, CsiError
from localkube.errors import CommandFailed
from localkube.procs import run_cmd

MIB = 1 << 20
DEFAULT_CAPACITY = 1 << 30
COPY_TIMEOUT = 600.0
_ID = re.compile(r"^[a-z0-9][a-z0-9.-]{0,252}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeMeta:
    id: str
    capacity: int
    block: bool
    source: str = ""  # "volume:<id>" or "snapshot:<id>" it was made from


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotMeta:
    id: str
    source_volume: str
    size: int
    block: bool
    created: float


def check_id(value: str, *, what: str) -> str:
    """`value` if it is a safe directory name (the sidecars' names are), else INVALID_ARGUMENT."""
    if not _ID.match(value):
        raise CsiError(Code.INVALID_ARGUMENT, f"{what} {value!r} is not a valid id")
    return value


def capacity_for(required: int, limit: int) -> int:
    """The size to allocate: `required` rounded up to MiB (1 GiB when 0), within `limit`."""
    if required < 0 or limit < 0:
        raise CsiError(Code.INVALID_ARGUMENT, "capacity_range: negative bytes")
    size = -(-(required or DEFAULT_CAPACITY) // MIB) * MIB
    if limit and size > limit:
        if required and required <= limit and limit % 512 == 0:
            return limit
        raise CsiError(Code.OUT_OF_RANGE, f"capacity_range: {size} bytes needed, limit is {limit}")
    return size


class Store:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.volumes = root / "volumes"
        self.snapshots = root / "snapshots"

    def ensure(self) -> None:
        for d in (self.volumes, self.snapshots):
            d.mkdir(parents=True, exist_ok=True)

    # -- volumes ------------------------------------------------------------------------------

    def volume_dir(self, volume_id: str) -> Path:
        return self.volumes / check_id(volume_id, what="volume_id")

    def data_path(self, meta: VolumeMeta) -> Path:
        """The directory (filesystem) or sparse file (block) holding the volume's data."""
        return self.volume_dir(meta.id) / ("disk.raw" if meta.block else "data")

    def volume(self, volume_id: str) -> VolumeMeta:
        return _read(VolumeMeta, self.volume_dir(volume_id), what=f"volume {volume_id}")

    def volume_ids(self) -> list[str]:
        return sorted(p.parent.name for p in self.volumes.glob("*/meta.json"))

    async def create_volume(self, want: VolumeMeta) -> VolumeMeta:
        """The volume `want` describes (copied from its source, if any); the existing one
        when already made with the same size and mode, ALREADY_EXISTS when not."""
        final = self.volume_dir(want.id)
        if (final / "meta.json").exists():
            have = self.volume(want.id)
            if (have.capacity, have.block, have.source) != (want.capacity, want.block, want.source):
                raise CsiError(
                    Code.ALREADY_EXISTS, f"volume {want.id} exists with other parameters"
                )
            return have
        data = "disk.raw" if want.block else "data"
        await _make(final, want, lambda tmp: self._fill(tmp / data, want))
        return want

    async def _fill(self, data: Path, want: VolumeMeta) -> None:
        source, block, size = self._source(want)
        if source is not None and block != want.block:
            kind = "block" if block else "filesystem"
            raise CsiError(Code.INVALID_ARGUMENT, f"{want.source} is a {kind} volume")
        if source is not None and size > want.capacity:
            raise CsiError(
                Code.OUT_OF_RANGE, f"{want.source} holds {size} bytes, more than {want.capacity}"
            )
        if source is not None:
            await copy_sparse(source, data)
        elif want.block:
            data.touch()
        else:
            data.mkdir()
        if want.block:
            with data.open("r+b") as f:
                f.truncate(want.capacity)

    def _source(self, want: VolumeMeta) -> tuple[Path | None, bool, int]:
        """(data path, block, size) of the volume or snapshot `want` is made from."""
        kind, _, ident = want.source.partition(":")
        if kind == "volume":
            src = self.volume(ident)
            return self.data_path(src), src.block, src.capacity
        if kind == "snapshot":
            snap = self.snapshot(ident)
            return self.snapshot_data(snap), snap.block, snap.size
        return None, want.block, 0

    def delete_volume(self, volume_id: str) -> None:
        """Gone (also when it never existed, as the spec wants)."""
        shutil.rmtree(self.volume_dir(volume_id), ignore_errors=True)

    def expand_volume(self, volume_id: str, capacity: int) -> VolumeMeta:
        """The volume at least `capacity` bytes (block: its file grown; never shrunk)."""
        meta = self.volume(volume_id)
        if capacity <= meta.capacity:
            return meta
        grown = VolumeMeta(**{**asdict(meta), "capacity": capacity})
        if meta.block:
            with self.data_path(meta).open("r+b") as f:
                f.truncate(capacity)
        (self.volume_dir(volume_id) / "meta.json").write_text(json.dumps(asdict(grown)))
        return grown

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot_dir(self, snapshot_id: str) -> Path:
        return self.snapshots / check_id(snapshot_id, what="snapshot_id")

    def snapshot_data(self, meta: SnapshotMeta) -> Path:
        return self.snapshot_dir(meta.id) / ("disk.raw" if meta.block else "data")

    def snapshot(self, snapshot_id: str) -> SnapshotMeta:
        return _read(SnapshotMeta, self.snapshot_dir(snapshot_id), what=f"snapshot {snapshot_id}")

    def snapshots_of(self, volume_id: str = "", snapshot_id: str = "") -> list[SnapshotMeta]:
        found = [self.snapshot(p.parent.name) for p in self.snapshots.glob("*/meta.json")]
        return [
            s
            for s in found
            if (not volume_id or s.source_volume == volume_id)
            and (not snapshot_id or s.id == snapshot_id)
        ]

    async def create_snapshot(self, snapshot_id: str, source_volume: str) -> SnapshotMeta:
        """A point-in-time copy of the volume; the existing one when made from the same
        volume, ALREADY_EXISTS when made from another."""
        final = self.snapshot_dir(snapshot_id)
        if (final / "meta.json").exists():
            have = self.snapshot(snapshot_id)
            if have.source_volume != source_volume:
                raise CsiError(
                    Code.ALREADY_EXISTS, f"snapshot {snapshot_id} exists for another volume"
                )
            return have
        vol = self.volume(source_volume)
        meta = SnapshotMeta(
            id=snapshot_id,
            source_volume=source_volume,
            size=vol.capacity,
            block=vol.block,
            created=time.time(),
        )
        data = self.snapshot_data(meta).name
        await _make(final, meta, lambda tmp: copy_sparse(self.data_path(vol), tmp / data))
        return meta

    def delete_snapshot(self, snapshot_id: str) -> None:
        shutil.rmtree(self.snapshot_dir(snapshot_id), ignore_errors=True)


M = TypeVar("M", VolumeMeta, SnapshotMeta)


def _read(cls: type[M], directory: Path, *, what: str) -> M:
    try:
        return cls(**json.loads((directory / "meta.json").read_text()))
    except FileNotFoundError:
        raise CsiError(Code.NOT_FOUND, f"{what} does not exist") from None


async def _make(
    final: Path, meta: VolumeMeta | SnapshotMeta, fill: Callable[[Path], Awaitable[None]]
) -> None:
    """`final` made whole or not at all: filled in a temporary sibling, then renamed."""
    tmp = final.parent / f".tmp-{final.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        await fill(tmp)
        (tmp / "meta.json").write_text(json.dumps(asdict(meta)))
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def copy_sparse(source: Path, dest: Path) -> None:
    """A copy of a file or directory tree keeping holes (cp's own sparse detection)."""
    try:
        await run_cmd(
            ["cp", "-a", "--sparse=always", "--reflink=auto", str(source), str(dest)],
            timeout=COPY_TIMEOUT,
        )
    except CommandFailed as exc:
        raise CsiError(Code.INTERNAL, f"copying {source.name}: {exc}") from None
