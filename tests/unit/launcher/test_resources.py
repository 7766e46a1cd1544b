"""CPU and memory hotplug in the launcher: the domain XML a VMI with maxSockets / maxGuest
gets, what the launcher reads back from libvirt's live XML, how it resizes, and that a
migration's destination XML carries the hot-plugged values."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from launcher import domxml
from launcher.errors import InvalidSpec
from launcher.migxml import destination_xml
from launcher.plan import memory_hotplug, topology, vcpus_current
from launcher.resources import Resources, observe
from shared.model import VirtualMachineInstance
from shared.wire.resources import HotplugResourcesArgs, ResourcesReply

GIB_KIB = 1024 * 1024


def vmi(cpu: dict[str, Any], memory: dict[str, Any]) -> VirtualMachineInstance:
    spec = {"domain": {"cpu": cpu, "memory": memory, "devices": {}}}
    return VirtualMachineInstance.from_dict(
        {"metadata": {"name": "a", "namespace": "n", "uid": "u-1"}, "spec": spec}
    )


def plan(v: VirtualMachineInstance) -> domxml.DomainPlan:
    return domxml.DomainPlan(
        name="n_a", uuid="u-1", namespace="n", vmi_name="a", virt_type="qemu", machine="pc",
        memory_kib=(v.spec.domain.guest_memory_bytes() or 0) // 1024,
        topology=topology(v), vcpus_current=vcpus_current(v), memory_hotplug=memory_hotplug(v),
        kernel=None, disks=(), interfaces=(), serial_log=Path("/s"),
        console_socket=Path("/c"), agent_socket=Path("/a"),
    )  # fmt: skip


HOT = vmi({"sockets": 1, "maxSockets": 4}, {"guest": "1Gi", "maxGuest": "4Gi"})


def test_room_to_grow_in_the_domain_xml() -> None:
    """maxSockets 4, sockets 1: four vCPUs of which one is online; maxGuest 4Gi over 1Gi: a
    NUMA cell of the boot memory, maxMemory and a virtio-mem device of 3Gi, none requested."""
    root = ET.fromstring(domxml.build(plan(HOT)))
    vcpu = root.find("vcpu")
    assert vcpu is not None and (vcpu.text, vcpu.get("current")) == ("4", "1")
    assert root.find("cpu/topology").get("sockets") == "4"  # type: ignore[union-attr]
    cell = root.find("cpu/numa/cell")
    assert cell is not None and (cell.get("cpus"), cell.get("memory")) == ("0-3", str(GIB_KIB))
    assert root.findtext("maxMemory") == str(4 * GIB_KIB)
    mem = root.find("devices/memory")
    assert mem is not None and mem.get("model") == "virtio-mem"
    assert mem.findtext("target/size") == str(3 * GIB_KIB)
    assert (mem.findtext("target/requested"), mem.findtext("target/node")) == ("0", "0")
    assert mem.find("alias").get("name") == domxml.MEMORY_DEVICE_ALIAS  # type: ignore[union-attr]


def test_no_ceiling_no_hotplug_devices() -> None:
    """Without maxSockets / maxGuest (or with nothing above the spec) the XML is as before."""
    for v in (
        vmi({"sockets": 2}, {"guest": "1Gi"}),
        vmi({"sockets": 2, "maxSockets": 2}, {"guest": "1Gi", "maxGuest": "1Gi"}),
    ):
        root = ET.fromstring(domxml.build(plan(v)))
        vcpu = root.find("vcpu")
        assert vcpu is not None and (vcpu.text, vcpu.get("current")) == ("2", None)
        assert root.find("maxMemory") is None and root.find("cpu/numa") is None
        assert root.find("devices/memory") is None


LIVE = """<domain type="qemu"><name>n_a</name><uuid>u-1</uuid>
<maxMemory slots="1" unit="KiB">4194304</maxMemory><memory unit="KiB">1572864</memory>
<vcpu placement="static" current="{vcpus}">4</vcpu>
<cpu><topology sockets="4" dies="1" cores="1" threads="1"/>
<numa><cell id="0" cpus="0-3" memory="1048576" unit="KiB"/></numa></cpu>
<devices><memory model="virtio-mem"><target><size unit="KiB">3145728</size><node>0</node>
<block unit="KiB">2048</block><requested unit="KiB">{requested}</requested>
<current unit="KiB">{current}</current></target><alias name="ua-memory-hotplug"/>
<address type="pci" domain="0x0000" bus="0x00" slot="0x07" function="0x0"/></memory>
</devices></domain>"""


def live(vcpus: int = 1, requested: int = 0, current: int = 0) -> str:
    return LIVE.format(vcpus=vcpus, requested=requested, current=current)


def test_observe_reads_the_live_xml() -> None:
    """Online and most vCPUs, the boot memory (NUMA cell), requested and plugged totals."""
    assert observe(live(2, 524288, 262144)) == ResourcesReply(
        vcpus=2, max_vcpus=4, memory_boot_kib=GIB_KIB,
        memory_requested_kib=GIB_KIB + 524288, memory_current_kib=GIB_KIB + 262144,
    )  # fmt: skip


class FakeVirt:
    def __init__(self) -> None:
        self.vcpus, self.requested = 1, 0
        self.calls: list[tuple[str, Any]] = []

    async def xml(self, name: str) -> str:
        return live(self.vcpus, self.requested, self.requested)

    async def set_vcpus(self, name: str, count: int) -> None:
        self.calls.append(("set_vcpus", count))
        self.vcpus = count

    async def update_device(self, name: str, xml: str) -> None:
        target = ET.fromstring(xml).find("target")
        assert target is not None and target.find("current") is None  # read-only: dropped
        self.calls.append(("update_device", target.findtext("requested")))
        self.requested = int(target.findtext("requested") or 0)


async def test_apply_hotplugs_once_and_is_idempotent() -> None:
    """2 vCPUs and 1.5Gi: setVcpus(2) and the virtio-mem device asked for 512Mi; asked
    again, nothing is called."""
    virt = FakeVirt()
    resources = Resources(virt=virt, domain=lambda: "n_a")
    args = HotplugResourcesArgs(vcpus=2, memory_kib=GIB_KIB + 524288)
    reply = await resources.apply(args)
    assert virt.calls == [("set_vcpus", 2), ("update_device", "524288")]
    assert (reply.vcpus, reply.memory_requested_kib) == (2, GIB_KIB + 524288)
    assert reply.memory_settled
    await resources.apply(args)
    assert len(virt.calls) == 2


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (HotplugResourcesArgs(vcpus=5), "spec.domain.cpu.sockets"),
        (HotplugResourcesArgs(vcpus=1, memory_kib=GIB_KIB - 2048), "spec.domain.memory.guest"),
    ],
)
async def test_refusals_name_the_field(args: HotplugResourcesArgs, field: str) -> None:
    """More vCPUs than the domain has room for, or less memory than plugged (no unplug):
    InvalidSpec naming the spec field, and libvirt is not called."""
    virt = FakeVirt()
    virt.requested = 2048
    with pytest.raises(InvalidSpec) as err:
        await Resources(virt=virt, domain=lambda: "n_a").apply(args)
    assert err.value.details["fields"][0]["path"] == field
    assert virt.calls == []


def test_migration_destination_carries_the_hotplugged_values() -> None:
    """The destination XML starts from the source's live XML: its vCPUs online and the
    virtio-mem device's requested size travel with the guest."""
    source = live(2, 524288, 524288)
    target = domxml.build(plan(HOT))  # the target prepared from the VMI as it started
    out = ET.fromstring(destination_xml(source, target))
    assert out.find("vcpu").get("current") == "2"  # type: ignore[union-attr]
    assert out.findtext("devices/memory/target/requested") == "524288"
    assert observe(ET.tostring(out, encoding="unicode")).vcpus == 2
