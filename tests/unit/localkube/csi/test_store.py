"""The test-bed CSI driver's store: volumes and snapshots as directories and sparse files
on one host directory, idempotent by name, clones and restores holding the source's data."""

from __future__ import annotations

from pathlib import Path

import pytest

from localkube.csi.errors import Code, CsiError
from localkube.csi.store import MIB, Store, VolumeMeta, capacity_for, check_id


def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path)
    store.ensure()
    return store


def test_capacity_is_rounded_up_to_mib_and_defaults_to_a_gib() -> None:
    """0 bytes asks for the default 1 GiB; sizes round up to whole MiB; a limit below the
    rounded size keeps the exact request when that fits, else OUT_OF_RANGE."""
    assert capacity_for(0, 0) == 1 << 30
    assert capacity_for(1, 0) == MIB
    assert capacity_for(64 * MIB, 0) == 64 * MIB
    assert capacity_for(MIB + 512, MIB + 512) == MIB + 512
    with pytest.raises(CsiError) as err:
        capacity_for(3 * MIB, 2 * MIB)
    assert err.value.code is Code.OUT_OF_RANGE


def test_ids_that_are_not_plain_names_are_refused() -> None:
    """A path-like id could escape the store's directory: INVALID_ARGUMENT naming it."""
    assert check_id("pvc-1234", what="name") == "pvc-1234"
    for bad in ("../etc", "a/b", "", "Upper"):
        with pytest.raises(CsiError) as err:
            check_id(bad, what="name")
        assert err.value.code is Code.INVALID_ARGUMENT and "name" in err.value.message


async def test_block_volume_is_a_sparse_file_of_its_size(tmp_path: Path) -> None:
    """A block volume is a sparse file exactly its capacity; made again with the same
    parameters it is the same volume, with others ALREADY_EXISTS."""
    store = _store(tmp_path)
    want = VolumeMeta(id="pvc-a", capacity=8 * MIB, block=True)
    meta = await store.create_volume(want)
    disk = store.data_path(meta)
    assert disk.stat().st_size == 8 * MIB and disk.stat().st_blocks == 0
    assert await store.create_volume(want) == meta
    with pytest.raises(CsiError) as err:
        await store.create_volume(VolumeMeta(id="pvc-a", capacity=16 * MIB, block=True))
    assert err.value.code is Code.ALREADY_EXISTS


async def test_clone_and_snapshot_restore_hold_the_data_of_their_time(tmp_path: Path) -> None:
    """A clone copies the source's files; a snapshot keeps the data as it was, and a
    volume restored from it has that data, not what was written later."""
    store = _store(tmp_path)
    src = await store.create_volume(VolumeMeta(id="pvc-src", capacity=MIB, block=False))
    (store.data_path(src) / "f").write_text("one")
    clone = await store.create_volume(
        VolumeMeta(id="pvc-clone", capacity=MIB, block=False, source="volume:pvc-src")
    )
    assert (store.data_path(clone) / "f").read_text() == "one"
    snap = await store.create_snapshot("snapshot-1", "pvc-src")
    assert snap.size == MIB and not snap.block
    (store.data_path(src) / "f").write_text("two")
    restored = await store.create_volume(
        VolumeMeta(id="pvc-r", capacity=MIB, block=False, source="snapshot:snapshot-1")
    )
    assert (store.data_path(restored) / "f").read_text() == "one"
    assert [s.id for s in store.snapshots_of("pvc-src")] == ["snapshot-1"]
    store.delete_snapshot("snapshot-1")
    store.delete_snapshot("snapshot-1")  # idempotent
    assert store.snapshots_of("pvc-src") == []


async def test_block_clone_may_grow_but_not_shrink_or_change_mode(tmp_path: Path) -> None:
    """A block clone into a larger volume keeps the data and takes the new size; a smaller
    target is OUT_OF_RANGE, a filesystem target INVALID_ARGUMENT, a missing source
    NOT_FOUND."""
    store = _store(tmp_path)
    src = await store.create_volume(VolumeMeta(id="pvc-b", capacity=2 * MIB, block=True))
    with store.data_path(src).open("r+b") as f:
        f.write(b"data")
    big = await store.create_volume(
        VolumeMeta(id="pvc-big", capacity=4 * MIB, block=True, source="volume:pvc-b")
    )
    assert store.data_path(big).stat().st_size == 4 * MIB
    assert store.data_path(big).read_bytes()[:4] == b"data"
    cases = {
        Code.OUT_OF_RANGE: VolumeMeta(id="pvc-s", capacity=MIB, block=True, source="volume:pvc-b"),
        Code.INVALID_ARGUMENT: VolumeMeta(
            id="pvc-f", capacity=4 * MIB, block=False, source="volume:pvc-b"
        ),
        Code.NOT_FOUND: VolumeMeta(id="pvc-n", capacity=MIB, block=True, source="volume:pvc-x"),
    }
    for code, want in cases.items():
        with pytest.raises(CsiError) as err:
            await store.create_volume(want)
        assert err.value.code is code
        assert not store.volume_dir(want.id).exists()


async def test_expansion_grows_the_block_file_and_never_shrinks(tmp_path: Path) -> None:
    """Expanding a block volume grows its file and records the capacity; asking for less
    leaves it as it is; deleting is idempotent."""
    store = _store(tmp_path)
    await store.create_volume(VolumeMeta(id="pvc-e", capacity=MIB, block=True))
    grown = store.expand_volume("pvc-e", 3 * MIB)
    assert grown.capacity == 3 * MIB and store.volume("pvc-e").capacity == 3 * MIB
    assert store.data_path(grown).stat().st_size == 3 * MIB
    assert store.expand_volume("pvc-e", MIB).capacity == 3 * MIB
    store.delete_volume("pvc-e")
    store.delete_volume("pvc-e")
    assert store.volume_ids() == []
