"""Disk and interface options in the domain XML (launcher/diskxml.py, launcher/nicxml.py):
golden output, libvirt's schema, I/O thread assignment, root ports, live link changes."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from launcher import diskxml, nicplan, nicxml, plan, volumes
from launcher.diskxml import BlockIO, DiskOptions
from launcher.domxml import DiskDevice, DiskPlan, InterfacePlan, NetBackend, build
from launcher.errors import InvalidSpec
from launcher.nicxml import NicOptions
from shared.model import Disk, VirtualMachineInstance
from tests.unit.launcher.test_domxml import PLAN

GOLDEN = Path(__file__).parent / "golden" / "options-domain.xml"

OPTIONS_PLAN = dataclasses.replace(
    PLAN,
    iothreads=2,
    disks=(
        dataclasses.replace(
            PLAN.disks[0],
            options=DiskOptions(
                io="native",
                error_policy="report",
                queues=2,
                iothread=2,
                dedicated=True,
                blockio=BlockIO(logical=512, physical=4096),
                discard_granularity=8192,
            ),
        ),
        dataclasses.replace(PLAN.disks[1], options=DiskOptions(tray="closed")),
        dataclasses.replace(
            PLAN.disks[2],
            options=DiskOptions(
                shareable=True, error_policy="stop", iothread=1, pci_address="0000:00:0b.0"
            ),
        ),
    ),
    interfaces=(
        InterfacePlan(
            alias="default",
            backend=NetBackend.ETHERNET,
            model="e1000e",
            tap="tap0",
            options=NicOptions(
                pci_address="0000:00:0a.0", acpi_index=3, boot_order=2, link_down=True
            ),
        ),
        InterfacePlan(
            alias="second",
            backend=NetBackend.ETHERNET,
            model="virtio",
            tap="tap1",
            options=NicOptions(queues=2),
        ),
    ),
)


def test_options_match_golden_file() -> None:
    """Every disk and interface option rendered as reviewed (KVPY_REGOLD=1 regenerates)."""
    xml = build(OPTIONS_PLAN)
    if os.environ.get("KVPY_REGOLD"):
        GOLDEN.write_text(xml + "\n")
    assert xml + "\n" == GOLDEN.read_text()


def test_options_pass_virt_xml_validate(tmp_path: Path) -> None:
    """libvirt's schema accepts the options, the iothreads and the root ports."""
    path = tmp_path / "domain.xml"
    path.write_text(build(OPTIONS_PLAN))
    result = subprocess.run(
        ["virt-xml-validate", str(path), "domain"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def _disk(**fields: Any) -> Disk:
    return Disk.from_dict({"name": "d", "disk": {"bus": "virtio"}, **fields})


def test_disk_pci_address_and_cdrom_tray_from_the_spec(tmp_path: Path) -> None:
    """disk.pciAddress and cdrom.tray reach the disk's options (the plain disk's address,
    the CD-ROM's tray), nothing else."""
    disk = _disk(disk={"bus": "virtio", "pciAddress": "0000:00:0B.0"})
    got = diskxml.options_of(disk, source=tmp_path, block=False, vcpus=1, multi_queue=False)
    assert got == DiskOptions(pci_address="0000:00:0B.0")
    cdrom = Disk.from_dict({"name": "c", "cdrom": {"bus": "sata", "tray": "open"}})
    got = diskxml.options_of(cdrom, source=tmp_path, block=False, vcpus=1, multi_queue=False)
    assert got == DiskOptions(tray="open")


def test_disk_options_from_the_spec(tmp_path: Path) -> None:
    """io, errorPolicy, custom blockSize (with discardGranularity), shareable,
    dedicatedIOThread and blockMultiQueue (queues = vCPUs) come from the disk's spec."""
    disk = _disk(
        io="threads", errorPolicy="enospace", shareable=True, dedicatedIOThread=True,
        blockSize={"custom": {"logical": 4096, "physical": 4096, "discardGranularity": 8192}},
    )  # fmt: skip
    got = diskxml.options_of(disk, source=tmp_path, block=False, vcpus=3, multi_queue=True)
    assert got == DiskOptions(
        io="threads", error_policy="enospace", shareable=True, dedicated=True, queues=3,
        blockio=BlockIO(logical=4096, physical=4096), discard_granularity=8192,
    )  # fmt: skip


def test_match_volume_reads_the_file_system_block(tmp_path: Path) -> None:
    """matchVolume on a file: 512 logical, the file system's block size as physical."""
    disk = _disk(blockSize={"matchVolume": {"enabled": True}})
    got = diskxml.options_of(disk, source=tmp_path, block=False, vcpus=1, multi_queue=False)
    assert got.blockio == BlockIO(logical=512, physical=os.statvfs(tmp_path).f_bsize)


def _virtio(dedicated: bool = False) -> tuple[bool, DiskOptions]:
    return True, DiskOptions(dedicated=dedicated)


@pytest.mark.parametrize(
    ("policy", "pool", "disks", "count", "threads"),
    [
        pytest.param(None, None, [_virtio(), _virtio()], 0, [None, None], id="none"),
        pytest.param(None, None, [_virtio(), _virtio(True)], 2, [1, 2], id="dedicated-only"),
        pytest.param("shared", None, [_virtio(), _virtio(), _virtio(True)], 2, [1, 1, 2],
                     id="shared"),
        pytest.param("auto", None, [_virtio(), _virtio(), _virtio()], 2, [1, 2, 1], id="auto"),
        pytest.param("supplementalPool", 3, [_virtio(), _virtio(True), (False, DiskOptions())],
                     3, [1, 2, None], id="pool"),
    ],
)  # fmt: skip
def test_io_threads_as_kubevirt_assigns_them(
    policy: str | None,
    pool: int | None,
    disks: list[tuple[bool, DiskOptions]],
    count: int,
    threads: list[int | None],
) -> None:
    """shared: one thread for the shared disks, one per dedicated disk; auto: a pool of
    min(2 x vCPUs, virtio disks); supplementalPool: its count, round-robin; non-virtio
    disks get none."""
    got_count, got = diskxml.assign_threads(disks, policy=policy, pool=pool, vcpus=1)
    assert got_count == count
    assert [o.iothread for o in got] == threads


def test_root_ports_follow_kubevirts_count() -> None:
    """Up to 2 GiB: the cold-plugged devices + 3 spares; above: 32 ports in all."""
    assert nicxml.root_ports(cold_devices=6, memory_kib=1024 * 1024) == 9
    assert nicxml.root_ports(cold_devices=6, memory_kib=4 * 1024 * 1024) == 32
    assert nicplan.root_ports(dataclasses.replace(PLAN, machine="pc")) == 0
    # 2 virtio disks + 1 NIC + scsi, virtio-serial, usb, balloon = 7, + 3 spares
    assert nicplan.root_ports(PLAN) == 10


def test_pci_address_as_libvirt_attributes() -> None:
    """0000:00:0A.1 is libvirt's domain/bus/slot/function, lower-case hex."""
    assert nicxml.pci_attributes("0000:00:0A.1") == {
        "type": "pci", "domain": "0x0000", "bus": "0x00", "slot": "0x0a", "function": "0x1",
    }  # fmt: skip


def test_link_updates_only_for_changed_interfaces() -> None:
    """The live domain's interface whose link differs from the wanted state is returned
    with its new <link state>; others and unknown ones are left alone."""
    live = build(OPTIONS_PLAN)  # default: down, second: up
    updates = nicxml.link_updates(live, {"default": True, "second": True, "other": False})
    assert [name for name, _ in updates] == ["default"]
    el = ET.fromstring(updates[0][1])
    assert el.find("link").get("state") == "up"  # type: ignore[union-attr]
    assert el.find("mac") is None and el.find("target").get("dev") == "tap0"  # type: ignore[union-attr]
    assert nicxml.link_updates(live, {"default": False, "second": True}) == []


def test_vmi_options_reach_the_plan(tmp_path: Path) -> None:
    """A disk's readonly and a NIC's options on the planned devices; multiqueue only on a
    virtio NIC with a tap."""
    vmi = VirtualMachineInstance.from_dict(
        {
            "metadata": {"name": "v", "namespace": "d", "uid": "u"},
            "spec": {
                "domain": {
                    "cpu": {"sockets": 2},
                    "devices": {
                        "networkInterfaceMultiqueue": True,
                        "interfaces": [
                            {"name": "a", "masquerade": {}, "model": "rtl8139", "state": "down",
                             "acpiIndex": 4, "bootOrder": 3, "pciAddress": "0000:00:0b.0"},
                        ],
                    },
                }
            },
        }
    )  # fmt: skip
    iface = vmi.spec.domain.devices.interfaces[0]
    got = nicplan._nic_options(vmi, iface, tap=True)
    assert got == NicOptions(
        pci_address="0000:00:0b.0", acpi_index=4, boot_order=3, link_down=True, queues=None
    )
    virtio = dataclasses.replace(iface, model=None)
    assert nicplan._nic_options(vmi, virtio, tap=True).queues == 2
    assert nicplan._nic_options(vmi, virtio, tap=False).queues is None


def test_disk_plan_marks_a_readonly_disk(tmp_path: Path) -> None:
    """disks[].disk.readonly renders <readonly/>."""
    ro = DiskPlan(
        alias="ro", device=DiskDevice.DISK, bus="virtio", target="vdc",
        source=tmp_path / "x", format="raw", readonly=True,
    )  # fmt: skip
    xml = build(dataclasses.replace(PLAN, disks=(ro,)))
    assert ET.fromstring(xml).find("devices/disk/readonly") is not None


def test_a_shareable_disk_needs_a_raw_volume(tmp_path: Path) -> None:
    """libvirt shares raw images only: shareable on a qcow2 volume (an emptyDisk) is
    refused naming the field; on a raw one (a claim) it passes."""
    disk = _disk(shareable=True)
    qcow2 = volumes.ResolvedDisk(path=tmp_path / "d.qcow2", format="qcow2")
    with pytest.raises(InvalidSpec, match=r"disks\[2\]\.shareable"):
        plan._check_shareable(disk, qcow2, index=2)
    plan._check_shareable(disk, dataclasses.replace(qcow2, format="raw"), index=2)
