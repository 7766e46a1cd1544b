"""The source side's migration job: the downtime limit it asks QEMU for, and its relaxing."""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from collections.abc import Mapping

from launcher.migration import DowntimePolicy, SourceMigrator
from launcher.virttypes import JobStats, MigrationRequest
from shared.wire.migration import MigrateArgs, MigrationInfo, MigrationPhase

SOURCE = """<domain type="qemu"><name>default_x</name><uuid>u-1</uuid>
<devices><disk type="file" device="disk"><source file="/a/o.qcow2"/>
<target dev="vda" bus="virtio"/></disk></devices></domain>"""
TARGET = """<domain type="qemu"><name>default_x</name><uuid>u-1</uuid>
<devices><disk type="file" device="disk"><source file="/b/o.qcow2"/>
<target dev="vda"/></disk></devices></domain>"""


class FakeVirt:
    """A MigrationPort whose migration lasts until `finish` is set."""

    def __init__(self) -> None:
        self.requests: list[MigrationRequest] = []
        self.downtimes: list[int] = []
        self.finish = asyncio.Event()

    async def migratable_xml(self, name: str) -> str:
        return SOURCE

    async def migrate(self, name: str, request: MigrationRequest) -> None:
        self.requests.append(request)
        await self.finish.wait()

    async def abort_job(self, name: str) -> None:
        self.finish.set()

    async def job_stats(self, name: str, *, completed: bool = False) -> JobStats:
        return JobStats(elapsed_ms=10, downtime_ms=7 if completed else None)

    async def set_max_downtime(self, name: str, milliseconds: int) -> None:
        self.downtimes.append(milliseconds)
        if len(self.downtimes) == 1:
            self.finish.set()

    async def block_capacity(self, name: str, target: str) -> int:
        return 64 * 1024 * 1024


async def _migrate(
    virt: FakeVirt,
    policy: DowntimePolicy,
    *,
    shared: Mapping[str, str] | None = None,
    migrated: tuple[str, ...] = (),
    target: str = TARGET,
) -> list[MigrationInfo]:
    published: list[MigrationInfo] = []
    final = asyncio.Event()

    def publish(info: MigrationInfo) -> None:
        published.append(info)
        if info.phase.is_final():
            final.set()

    job = SourceMigrator(
        virt=virt,
        domain="default_x",
        publish=publish,
        downtime=policy,
        progress_interval=0.001,
        shared_disks=lambda: shared or {},
    )
    async with asyncio.timeout(5):
        async with asyncio.TaskGroup() as tg:
            runner = tg.create_task(job.run())
            args = MigrateArgs(address="/mig/x", domain_xml=target, migrated_volumes=migrated)
            job.start(args)
            await final.wait()
            runner.cancel()
    return published


async def test_the_job_asks_for_a_low_downtime_then_relaxes_it_when_not_converging() -> None:
    """The request carries the initial limit (below QEMU's 300 ms); once the migration has
    run for `relax_after_polls` progress polls, the relaxed limit is set on the domain."""
    virt = FakeVirt()
    policy = DowntimePolicy(initial_ms=40, relaxed_ms=250, relax_after_polls=3)
    published = await _migrate(virt, policy)
    assert [r.max_downtime_ms for r in virt.requests] == [40]
    assert virt.downtimes == [250]
    assert published[-1].phase is MigrationPhase.SUCCEEDED
    assert published[-1].downtime_ms == 7


async def test_a_quick_migration_keeps_the_low_limit() -> None:
    """A migration that ends before the relax point never touches the limit again."""
    virt = FakeVirt()
    virt.finish.set()
    await _migrate(virt, DowntimePolicy(relax_after_polls=1000))
    assert virt.downtimes == []
    assert virt.requests[0].max_downtime_ms == DowntimePolicy().initial_ms


async def test_disks_on_shared_storage_stay_where_they_are() -> None:
    """A writable disk on the claim's shared storage is not copied: the request copies
    only the other writable disks and names the shared ones (libvirt is then told the
    storage is shared, VIR_MIGRATE_UNSAFE, as it cannot see that by filesystem type)."""
    virt = FakeVirt()
    virt.finish.set()
    published = await _migrate(virt, DowntimePolicy(), shared={"vda": "data"})
    (request,) = virt.requests
    assert (request.copy_disks, request.shared_disks) == ((), ("vda",))
    assert published[-1].phase is MigrationPhase.SUCCEEDED


async def test_local_disks_are_copied() -> None:
    """Without shared disks every writable disk travels (the containerDisk overlay)."""
    virt = FakeVirt()
    virt.finish.set()
    await _migrate(virt, DowntimePolicy(relax_after_polls=1000))
    (request,) = virt.requests
    assert (request.copy_disks, request.shared_disks) == (("vda",), ())


async def test_a_volume_migration_copies_its_disk_at_the_source_size() -> None:
    """A shared claim's disk named in migratedVolumes is copied (not left in place) and the
    destination XML limits the new claim's disk to the source disk's size with a storage
    slice, so QEMU's mirror finds both ends the same size."""
    virt = FakeVirt()
    virt.finish.set()
    await _migrate(virt, DowntimePolicy(), shared={"vda": "data"}, migrated=("data",))
    (request,) = virt.requests
    assert (request.copy_disks, request.shared_disks) == (("vda",), ())
    disk = ET.fromstring(request.dest_xml).find("devices/disk/source")
    assert disk is not None and disk.get("file") == "/b/o.qcow2"
    slice_ = disk.find("slices/slice")
    assert slice_ is not None
    assert slice_.attrib == {"type": "storage", "offset": "0", "size": str(64 * 1024 * 1024)}


async def test_a_target_of_another_name_renames_the_domain_on_arrival() -> None:
    """A decentralized migration's target prepared `b_y` (its own uuid): the destination
    definition keeps the source's name and uuid (libvirt's ABI check), the request names
    `b_y` as the destination name and persists the definition under it; a usual target
    (same name) asks for no renaming."""
    virt = FakeVirt()
    virt.finish.set()
    other = TARGET.replace(
        "<name>default_x</name><uuid>u-1</uuid>", "<name>b_y</name><uuid>u-2</uuid>"
    )
    await _migrate(virt, DowntimePolicy(relax_after_polls=1000), target=other)
    (request,) = virt.requests
    dest = ET.fromstring(request.dest_xml)
    assert (dest.findtext("name"), dest.findtext("uuid")) == ("default_x", "u-1")
    assert request.dest_name == "b_y" and request.persist_xml is not None
    persisted = ET.fromstring(request.persist_xml)
    assert (persisted.findtext("name"), persisted.findtext("uuid")) == ("b_y", "u-1")
    virt = FakeVirt()
    virt.finish.set()
    await _migrate(virt, DowntimePolicy(relax_after_polls=1000))
    assert (virt.requests[0].dest_name, virt.requests[0].persist_xml) == (None, None)
