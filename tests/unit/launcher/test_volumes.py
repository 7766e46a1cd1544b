"""Each volume source resolves to its disk through its own module (launcher/volumes):
PVCs and hostDisks in the directory the pod mounted for them (KubeVirt's layout), made
sparse when absent and allowed, read-only claims never written; device names go past vdz;
a start that fails part-way removes the disk files it made; a block-mode claim is its
device."""

from __future__ import annotations

import dataclasses
import os
import stat
import typing
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from launcher import volumes
from launcher.disks import DiskContext
from launcher.domxml import DiskDevice, DiskPlan, disk_xml
from launcher.errors import DiskFailure
from launcher.plan import _disks, device_name
from shared import podlayout
from shared.model import VirtualMachineInstance
from shared.model.volumes import MemoryDumpVolumeSource, VolumeSource
from tests.integration.launcher.harness import tiny_vmi

MI = 1024 * 1024


def _ctx(tmp_path: Path, **capacities: int) -> DiskContext:
    (tmp_path / "work").mkdir(exist_ok=True)
    return DiskContext(
        work_dir=tmp_path / "work",
        container_disks=tmp_path / "container-disks",
        vmi_disks=tmp_path / "vmi-disks",
        claim_capacities=capacities,
    )


def _mount(ctx: DiskContext, volume: str) -> Path:
    mount = ctx.mount_of(volume)
    mount.mkdir(parents=True)
    return mount


def _vmi(*volumes: dict[str, Any]) -> VirtualMachineInstance:
    raw = tiny_vmi()
    raw["spec"]["domain"]["devices"]["disks"] = [
        {"name": v["name"], "disk": {"bus": "virtio"}} for v in volumes
    ]
    raw["spec"]["volumes"] = list(volumes)
    return VirtualMachineInstance.from_dict(raw)


async def _resolve(ctx: DiskContext, volume: dict[str, Any]) -> volumes.ResolvedDisk:
    vmi = _vmi(volume)
    req = volumes.VolumeRequest(vmi=vmi, name=volume["name"], ctx=ctx, field="spec.volumes[0]")
    return await volumes.resolve(req, vmi.spec.volumes[0].source())


def _pvc(name: str = "data", claim: str = "claim", **extra: Any) -> dict[str, Any]:
    return {"name": name, "persistentVolumeClaim": {"claimName": claim, **extra}}


def test_every_typed_source_has_a_resolver() -> None:
    """The table is keyed by every type the model's Volume.source() can return, but a
    memoryDump's: no disk of the guest (the handler mounts its file for memory_dump)."""
    assert set(volumes.RESOLVERS) == set(typing.get_args(VolumeSource)) - {MemoryDumpVolumeSource}


async def test_pvc_disk_img_is_made_sparse_to_the_claims_size(tmp_path: Path) -> None:
    """No disk.img in the claim: one is made, sparse, of the claim's size, used raw."""
    ctx = _ctx(tmp_path, data=64 * MI)
    mount = _mount(ctx, "data")
    resolved = await _resolve(ctx, _pvc())
    assert resolved.path == mount / podlayout.PVC_DISK_FILE
    assert (resolved.format, resolved.readonly, resolved.created) == (
        "raw",
        False,
        (resolved.path,),
    )
    assert resolved.path.stat().st_size == 64 * MI and resolved.path.stat().st_blocks == 0


async def test_an_existing_pvc_disk_img_is_used_as_it_is(tmp_path: Path) -> None:
    """A disk.img already there is used, never remade or resized, even if it says qcow2."""
    ctx = _ctx(tmp_path, data=64 * MI)
    disk = _mount(ctx, "data") / "disk.img"
    disk.write_bytes(b"QFI\xfb" + b"\0" * 508)
    resolved = await _resolve(ctx, _pvc())
    assert (resolved.path, resolved.format, resolved.created) == (disk, "raw", ())
    assert disk.stat().st_size == 512


async def test_a_read_only_claim_stays_read_only_and_is_never_written(tmp_path: Path) -> None:
    """readOnly: the disk is attached read-only; with no disk.img the start is refused
    and nothing is made in the claim."""
    ctx = _ctx(tmp_path, data=64 * MI)
    mount = _mount(ctx, "data")
    with pytest.raises(DiskFailure, match=r"persistentVolumeClaim: claim 'claim' is readOnly"):
        await _resolve(ctx, _pvc(readOnly=True))
    assert list(mount.iterdir()) == []
    (mount / "disk.img").write_bytes(b"\0" * 512)
    assert (await _resolve(ctx, _pvc(readOnly=True))).readonly


@pytest.mark.parametrize(
    ("setup", "match"),
    [
        pytest.param("unmounted", r"claim 'claim' is not mounted in the pod", id="unmounted"),
        pytest.param("no-size", r"its size is unknown", id="no-size"),
        pytest.param("symlink", r"outside the pod's disk roots", id="symlink-out"),
    ],
)
async def test_pvc_problems_are_named(tmp_path: Path, setup: str, match: str) -> None:
    """An unmounted claim, an unknown size, a disk.img linking out of the claim: each a
    DiskFailure naming the field."""
    ctx = _ctx(tmp_path) if setup == "no-size" else _ctx(tmp_path, data=MI)
    if setup != "unmounted":
        mount = _mount(ctx, "data")
        if setup == "symlink":
            (mount / "disk.img").symlink_to("/etc/hostname")
    with pytest.raises(DiskFailure, match=rf"spec\.volumes\[0\]\.persistentVolumeClaim.*{match}"):
        await _resolve(ctx, _pvc())


def _host(kind: str, path: str = "/var/data/disk.img", **extra: Any) -> dict[str, Any]:
    return {"name": "host", "hostDisk": {"path": path, "type": kind, **extra}}


async def test_host_disk_or_create_makes_the_file_in_the_mounted_directory(tmp_path: Path) -> None:
    """DiskOrCreate: the path's last element in the pod's mount of its directory, made
    sparse to capacity; a second start uses it and makes nothing."""
    ctx = _ctx(tmp_path)
    mount = _mount(ctx, "host")
    resolved = await _resolve(ctx, _host("DiskOrCreate", capacity="32Mi"))
    assert resolved.path == mount / "disk.img" and resolved.created == (resolved.path,)
    assert resolved.path.stat().st_size == 32 * MI
    again = await _resolve(ctx, _host("DiskOrCreate", capacity="32Mi"))
    assert (again.path, again.created, again.format) == (resolved.path, (), "raw")


@pytest.mark.parametrize(
    ("volume", "setup", "match"),
    [
        pytest.param(_host("Disk"), "", r"hostDisk\.path: /var/data/disk\.img does not exist",
                     id="disk-missing"),
        pytest.param(_host("DiskOrCreate", capacity="4Ei"), "",
                     r"hostDisk\.capacity: not enough space to create disk\.img", id="too-big"),
        pytest.param(_host("Disk"), "symlink", r"hostDisk\.path: .* outside", id="symlink-out"),
        pytest.param(_host("Disk"), "dir", r"hostDisk\.path: .* is not a regular file", id="a-directory"),
        pytest.param(_host("Disk"), "unmounted", r"hostDisk: the pod has no mount", id="unmounted"),
    ],
)  # fmt: skip
async def test_host_disk_problems_are_named(
    tmp_path: Path, volume: dict[str, Any], setup: str, match: str
) -> None:
    """Missing file (type Disk), a capacity the node cannot hold, a link out of the
    mount, a directory, no mount: each refused naming the field, nothing left behind."""
    ctx = _ctx(tmp_path)
    if setup != "unmounted":
        mount = _mount(ctx, "host")
        if setup == "symlink":
            (mount / "disk.img").symlink_to("/etc/hostname")
        elif setup == "dir":
            (mount / "disk.img").mkdir()
    with pytest.raises(DiskFailure, match=rf"spec\.volumes\[0\]\.{match}"):
        await _resolve(ctx, volume)
    if setup == "":
        assert list(ctx.mount_of("host").iterdir()) == []


def test_device_names_go_past_z() -> None:
    """vda … vdz, then vdaa … vdaz, vdba …, as Linux and libvirt name them."""
    names = [device_name("vd", i) for i in range(60)]
    assert names[:3] == ["vda", "vdb", "vdc"] and names[25] == "vdz"
    assert names[26:29] == ["vdaa", "vdab", "vdac"] and names[52] == "vdba"
    assert device_name("sd", 701) == "sdzz" and device_name("sd", 702) == "sdaaa"


async def test_thirty_disks_are_named_each_once(tmp_path: Path) -> None:
    """30 virtio empty disks plan as vda … vdad, no IndexError."""
    ctx = _ctx(tmp_path)
    vols = [{"name": f"d{i}", "emptyDisk": {"capacity": "1Mi"}} for i in range(30)]
    plans = await _disks(_vmi(*vols), ctx)
    assert [p.target for p in plans][-4:] == ["vdaa", "vdab", "vdac", "vdad"]
    assert len({p.target for p in plans}) == 30


async def test_a_failed_start_removes_the_disks_it_made(tmp_path: Path) -> None:
    """Volumes resolved before a failing one leave no file they made; files that were
    there before the start stay."""
    ctx = _ctx(tmp_path)
    old = ctx.work_dir / "kept-empty.qcow2"
    old.write_bytes(b"x")
    _mount(ctx, "made")
    vols = [
        {"name": "kept", "emptyDisk": {"capacity": "1Mi"}},
        {"name": "fresh", "emptyDisk": {"capacity": "1Mi"}},
        {
            "name": "made",
            "hostDisk": {"path": "/d/made.img", "type": "DiskOrCreate", "capacity": "1Mi"},
        },
        _pvc(name="broken"),
    ]
    with pytest.raises(DiskFailure, match="broken"):
        await _disks(_vmi(*vols), ctx)
    assert sorted(os.listdir(ctx.work_dir)) == ["kept-empty.qcow2"]
    assert list(ctx.mount_of("made").iterdir()) == []


async def test_a_pvc_disk_is_shared_and_bypasses_the_host_cache(tmp_path: Path) -> None:
    """A claim's disk is marked shared (a migration target opens the same file, nothing
    copies it) and opened with cache=none where the filesystem takes O_DIRECT
    (KubeVirt's default), writethrough otherwise: no host page cache holds guest writes."""
    ctx = _ctx(tmp_path, data=MI)
    _mount(ctx, "data")
    resolved = await _resolve(ctx, _pvc())
    try:
        os.close(os.open(resolved.path, os.O_RDONLY | os.O_DIRECT))
        direct = True
    except OSError:
        direct = False
    assert resolved.shared
    assert resolved.cache == ("none" if direct else "writethrough")


async def test_a_migration_target_opens_the_claims_disk_and_never_makes_one(
    tmp_path: Path,
) -> None:
    """On a migration target an existing disk.img is opened as it is (same bytes, same
    size); an absent one is refused, naming the claim and why, and nothing is made —
    an empty disk there would hide the guest's data behind a storage mix-up."""
    ctx = dataclasses.replace(_ctx(tmp_path, data=64 * MI), incoming=True)
    mount = _mount(ctx, "data")
    with pytest.raises(DiskFailure, match=r"claim 'claim' holds no disk.img on the migration"):
        await _resolve(ctx, _pvc())
    assert list(mount.iterdir()) == []
    disk = mount / "disk.img"
    disk.write_bytes(b"KVPY-COUNT 3\n" + b"\0" * 499)
    resolved = await _resolve(ctx, _pvc())
    assert (resolved.path, resolved.created, resolved.shared) == (disk, (), True)
    assert disk.read_bytes()[:13] == b"KVPY-COUNT 3\n" and disk.stat().st_size == 512


async def test_a_block_claim_is_its_device_given_raw(tmp_path: Path) -> None:
    """A block-mode claim's device node at /dev/vmi-disks/<volume> (here a device node made
    in a temporary dir) is the disk itself: raw, cache=none, shared, nothing made; its
    domain XML is a <disk type='block'> with <source dev=...>."""
    ctx = dataclasses.replace(_ctx(tmp_path), block_devices=tmp_path / "dev")
    device = ctx.block_device_of("data")
    device.parent.mkdir()
    os.mknod(device, stat.S_IFBLK | 0o600, os.makedev(7, 200))
    resolved = await _resolve(ctx, _pvc())
    assert (resolved.path, resolved.format, resolved.block) == (device, "raw", True)
    assert (resolved.cache, resolved.shared, resolved.created) == ("none", True, ())
    plan = DiskPlan(alias="data", device=DiskDevice.DISK, bus="virtio", target="vdb",
                    source=device, format="raw", block=True, cache="none")  # fmt: skip
    xml = ET.fromstring(disk_xml(plan))
    assert xml.get("type") == "block"
    assert xml.find("source").attrib == {"dev": str(device)}  # type: ignore[union-attr]


async def test_a_volume_migration_target_makes_the_destination_disk_not_shared(
    tmp_path: Path,
) -> None:
    """On a migration target whose VMI migrates volume `data` (VolumesChange=True,
    migratedVolumes), the destination claim's absent disk.img is made sparse to the
    claim's size and is not shared (the migration copies the disk into it); a first start
    of that VMI (no migration) keeps the claim's disk shared as before."""
    vmi = _vmi(_pvc())
    raw = vmi.to_dict()
    raw["status"] = {
        "conditions": [{"type": "VolumesChange", "status": "True"}],
        "migratedVolumes": [{"volumeName": "data", "sourcePVCInfo": {"claimName": "old"},
                             "destinationPVCInfo": {"claimName": "claim"}}],
    }  # fmt: skip
    migrating = VirtualMachineInstance.from_dict(raw)
    ctx = dataclasses.replace(_ctx(tmp_path, data=64 * MI), incoming=True)
    mount = _mount(ctx, "data")
    req = volumes.VolumeRequest(vmi=migrating, name="data", ctx=ctx, field="spec.volumes[0]")
    resolved = await volumes.resolve(req, migrating.spec.volumes[0].source())
    disk = mount / "disk.img"
    assert (resolved.path, resolved.created, resolved.shared) == (disk, (disk,), False)
    assert disk.stat().st_size == 64 * MI
    first = dataclasses.replace(ctx, incoming=False)
    req = volumes.VolumeRequest(vmi=migrating, name="data", ctx=first, field="spec.volumes[0]")
    assert (await volumes.resolve(req, migrating.spec.volumes[0].source())).shared


async def test_a_receiving_vmis_claim_is_made_on_the_target_not_shared(tmp_path: Path) -> None:
    """A decentralized migration's receiving VMI (annotated, WaitingForSync) on its
    target: its claim's absent disk.img is made sparse to the claim's size and is not
    shared (the migration copies the source's claim disk into it)."""
    raw = _vmi(_pvc()).to_dict()
    raw["metadata"]["annotations"] = {"kubevirt.io/decentralized-receiver": "true"}
    raw["status"] = {"phase": "WaitingForSync"}
    receiving = VirtualMachineInstance.from_dict(raw)
    ctx = dataclasses.replace(_ctx(tmp_path, data=64 * MI), incoming=True)
    mount = _mount(ctx, "data")
    req = volumes.VolumeRequest(vmi=receiving, name="data", ctx=ctx, field="spec.volumes[0]")
    resolved = await volumes.resolve(req, receiving.spec.volumes[0].source())
    disk = mount / "disk.img"
    assert (resolved.path, resolved.created, resolved.shared) == (disk, (disk,), False)
    assert disk.stat().st_size == 64 * MI


async def test_a_shared_host_disk_is_shared_and_never_made_on_a_target(tmp_path: Path) -> None:
    """hostDisk.shared: true → a shared disk (left in place by a migration) opened
    cache=none or writethrough as a claim's; on a migration target an absent file is
    refused naming hostDisk.shared and nothing is made. Unshared: neither."""
    ctx = _ctx(tmp_path)
    mount = _mount(ctx, "host")
    resolved = await _resolve(ctx, _host("DiskOrCreate", capacity="1Mi", shared=True))
    assert resolved.shared and resolved.cache in ("none", "writethrough")
    plain = await _resolve(ctx, _host("DiskOrCreate", capacity="1Mi"))
    assert not plain.shared and plain.cache is None
    (mount / "disk.img").unlink()
    target = dataclasses.replace(ctx, incoming=True)
    with pytest.raises(DiskFailure, match=r"spec\.volumes\[0\]\.hostDisk\.shared: .* not shared"):
        await _resolve(target, _host("DiskOrCreate", capacity="1Mi", shared=True))
    assert list(mount.iterdir()) == []
