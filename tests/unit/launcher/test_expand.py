"""Claim disks grown under the running guest (launcher.expand): files grown then resized,
block devices resized to the device's size, nothing shrunk, read-only disks left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.errors import DiskFailure
from launcher.expand import DiskExpander, live_disks
from shared.wire.expand import ExpandDisksArgs, ExpandDisksReply

MIB = 1 << 20


def _xml(data: Path, *, readonly: bool = False) -> str:
    ro = "<readonly/>" if readonly else ""
    return f"""<domain><devices>
      <disk type='file' device='disk'><source file='{data}'/><target dev='vdb'/>
        {ro}<alias name='ua-data'/></disk>
      <disk type='block' device='disk'><source dev='/dev/vmi-disks/blk'/><target dev='vdc'/>
        <alias name='ua-blk'/></disk>
      <disk type='file' device='cdrom'><source file='/x.iso'/><target dev='sda'/></disk>
    </devices></domain>"""


class FakeVirt:
    def __init__(self, xml: str, capacities: dict[str, int]) -> None:
        self.xml = xml
        self.capacities = capacities
        self.resized: list[tuple[str, int]] = []

    async def domain_xml(self, name: str) -> str:
        return self.xml

    async def block_capacity(self, name: str, target: str) -> int:
        return self.capacities[target]

    async def block_resize(self, name: str, target: str, size: int) -> None:
        self.resized.append((target, size))
        self.capacities[target] = size


def test_live_disks_lists_our_aliased_file_and_block_disks() -> None:
    """Only aliased disks with a source; block and readonly are read from the XML."""
    disks = list(live_disks(_xml(Path("/d/disk.img"), readonly=True)))
    assert [(d.volume, d.target, d.block, d.readonly) for d in disks] == [
        ("data", "vdb", False, True),
        ("blk", "vdc", True, False),
    ]


async def test_a_grown_file_claim_grows_the_file_then_the_guest_disk(tmp_path: Path) -> None:
    """disk.img of 64 MiB, claim now 128 MiB + a few bytes: the file is grown to 128 MiB
    (aligned down to 1 MiB) and the guest's disk resized to it; a second call changes
    nothing."""
    img = tmp_path / "disk.img"
    img.write_bytes(b"")
    img.touch()
    with img.open("r+b") as f:
        f.truncate(64 * MIB)
    virt = FakeVirt(_xml(img), {"vdb": 64 * MIB, "vdc": 0})
    expander = DiskExpander(virt=virt, domain=lambda: "ns_vm")
    reply = await expander.expand(ExpandDisksArgs(capacities={"data": 128 * MIB + 100}))
    assert reply == ExpandDisksReply(expanded={"data": 128 * MIB})
    assert img.stat().st_size == 128 * MIB
    assert virt.resized == [("vdb", 128 * MIB)]
    again = await expander.expand(ExpandDisksArgs(capacities={"data": 128 * MIB}))
    assert again.expanded == {} and len(virt.resized) == 1


async def test_nothing_is_shrunk_and_read_only_disks_are_left_alone(tmp_path: Path) -> None:
    """A capacity below the guest's size, or a readonly disk: no resize."""
    img = tmp_path / "disk.img"
    img.write_bytes(b"\0" * 4096)
    smaller = FakeVirt(_xml(img), {"vdb": 64 * MIB})
    reply = await DiskExpander(virt=smaller, domain=lambda: "d").expand(
        ExpandDisksArgs(capacities={"data": 32 * MIB})
    )
    assert reply.expanded == {} and smaller.resized == []
    readonly = FakeVirt(_xml(img, readonly=True), {"vdb": 64 * MIB})
    reply = await DiskExpander(virt=readonly, domain=lambda: "d").expand(
        ExpandDisksArgs(capacities={"data": 128 * MIB})
    )
    assert reply.expanded == {} and readonly.resized == []


async def test_a_block_disk_is_resized_to_its_device_size(tmp_path: Path) -> None:
    """The block disk's size comes from the device (here a file standing in for it), not
    from the claim's capacity."""
    device = tmp_path / "blk"
    with device.open("wb") as f:
        f.truncate(96 * MIB)
    xml = f"""<domain><devices><disk type='block'><source dev='{device}'/>
      <target dev='vdc'/><alias name='ua-blk'/></disk></devices></domain>"""
    virt = FakeVirt(xml, {"vdc": 64 * MIB})
    reply = await DiskExpander(virt=virt, domain=lambda: "d").expand(
        ExpandDisksArgs(capacities={"blk": 1 << 40})
    )
    assert reply.expanded == {"blk": 96 * MIB}
    assert virt.resized == [("vdc", 96 * MIB)]


async def test_a_disk_that_cannot_be_grown_is_a_disk_failure(tmp_path: Path) -> None:
    """A file source that is gone: DiskFailure naming the volume."""
    virt = FakeVirt(_xml(tmp_path / "gone.img"), {"vdb": MIB})
    with pytest.raises(DiskFailure, match="volume data"):
        await DiskExpander(virt=virt, domain=lambda: "d").expand(
            ExpandDisksArgs(capacities={"data": 8 * MIB})
        )
