"""The domain XML builder: golden output, schema validity, and escaping of user strings."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from launcher.devstats import device_names
from launcher.domxml import (
    DiskDevice,
    DiskPlan,
    DomainPlan,
    InterfacePlan,
    KernelPlan,
    NetBackend,
    Topology,
    build,
)
from launcher.passt import PasstInterface
from launcher.passt import argv as passt_argv
from launcher.qemuns import QEMU_NS

GOLDEN = Path(__file__).parent / "golden" / "tiny-domain.xml"

PLAN = DomainPlan(
    name="default_tiny",
    uuid="11111111-2222-3333-4444-555555555555",
    namespace="default",
    vmi_name="tiny",
    virt_type="qemu",
    machine="q35",
    memory_kib=131072,
    topology=Topology(sockets=1, cores=2, threads=1),
    kernel=KernelPlan(
        kernel=Path("/img/boot/vmlinuz"),
        initrd=Path("/img/boot/initrd.img"),
        cmdline="console=ttyS0",
    ),
    disks=(
        DiskPlan(
            alias="containerdisk",
            device=DiskDevice.DISK,
            bus="virtio",
            target="vda",
            source=Path("/img/disk/disk.qcow2"),
            format="qcow2",
            boot_order=1,
        ),
        DiskPlan(
            alias="cloudinit",
            device=DiskDevice.CDROM,
            bus="sata",
            target="sda",
            source=Path("/pod/disks/cloudinit.iso"),
            format="raw",
            readonly=True,
        ),
        DiskPlan(
            alias="data",
            device=DiskDevice.DISK,
            bus="virtio",
            target="vdb",
            source=Path("/pod/vmi-disks/data/disk.img"),
            format="raw",
            shared=True,
            cache="none",
        ),
    ),
    interfaces=(
        InterfacePlan(
            alias="default", backend=NetBackend.USER, model="virtio", mac="02:00:00:00:00:01"
        ),
    ),
    serial_log=Path("/pod/serial.log"),
    console_socket=Path("/run/libvirt/kvpy/console.sock"),
    agent_socket=Path("/run/libvirt/kvpy/agent.sock"),
    partition="/machine/kvpy-test",
    vnc_socket=Path("/run/libvirt/kvpy/vnc.sock"),
    pcie_root_ports=9,
)


def test_matches_golden_file() -> None:
    """The rendered XML is exactly the reviewed golden file (regenerate with KVPY_REGOLD=1)."""
    xml = build(PLAN)
    if os.environ.get("KVPY_REGOLD"):
        GOLDEN.write_text(xml + "\n")
    assert xml + "\n" == GOLDEN.read_text()


@pytest.mark.parametrize("virt_type", ["qemu", "kvm"])
def test_passes_virt_xml_validate(tmp_path: Path, virt_type: str) -> None:
    """libvirt's own schema accepts the XML for both virt types."""
    path = tmp_path / "domain.xml"
    path.write_text(build(dataclasses.replace(PLAN, virt_type=virt_type)))
    result = subprocess.run(
        ["virt-xml-validate", str(path), "domain"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_user_strings_are_escaped() -> None:
    """Metacharacters in names, paths and the kernel command line stay data, not markup."""
    nasty = "a'<b>\"&</os><devices/>"
    plan = dataclasses.replace(
        PLAN,
        vmi_name=nasty,
        kernel=KernelPlan(kernel=Path(f"/k/{nasty}"), initrd=None, cmdline=nasty),
    )
    root = ET.fromstring(build(plan))
    assert root.findtext("os/cmdline") == nasty
    assert root.findtext("os/kernel") == f"/k/{nasty}"
    assert root.find("os/initrd") is None
    assert len(root.findall("devices")) == 1
    assert root.findtext("metadata/{http://kubevirt.io}kubevirt/{http://kubevirt.io}name") == nasty


def test_tcg_gets_tb_cache_and_kvm_gets_host_model() -> None:
    """TCG domains cap the translation cache; KVM domains use host-model CPUs."""
    tcg = ET.fromstring(build(PLAN))
    assert tcg.findtext("features/tcg/tb-cache") == "32"
    kvm = ET.fromstring(build(dataclasses.replace(PLAN, virt_type="kvm")))
    assert kvm.find("features/tcg") is None
    assert kvm.find("cpu").get("mode") == "host-model"  # type: ignore[union-attr]


def test_bridge_binding_uses_a_tap() -> None:
    """A bridge interface becomes an ethernet (tap) device, masquerade becomes user NAT."""
    plan = dataclasses.replace(
        PLAN, interfaces=(InterfacePlan(alias="br", backend=NetBackend.ETHERNET, model="e1000"),)
    )
    iface = ET.fromstring(build(plan)).find("devices/interface")
    assert iface is not None
    assert iface.get("type") == "ethernet"
    assert iface.find("model").get("type") == "e1000"  # type: ignore[union-attr]


def test_vnc_on_a_unix_socket_with_a_vga_framebuffer() -> None:
    """With a VNC socket: QEMU's VNC server listens on it and a VGA card gives it a
    framebuffer; without (autoattachGraphicsDevice: false): no graphics, no video."""
    root = ET.fromstring(build(PLAN))
    graphics = root.find("devices/graphics")
    assert graphics is not None and graphics.get("type") == "vnc"
    listen = graphics.find("listen")
    assert listen is not None
    assert (listen.get("type"), listen.get("socket")) == ("socket", "/run/libvirt/kvpy/vnc.sock")
    assert root.find("devices/video/model").get("type") == "vga"  # type: ignore[union-attr]
    bare = ET.fromstring(build(dataclasses.replace(PLAN, vnc_socket=None)))
    assert bare.find("devices/graphics") is None
    assert bare.find("devices/video/model").get("type") == "none"  # type: ignore[union-attr]


def test_a_wired_interface_opens_the_handlers_tap() -> None:
    """An interface virt-handler wired is an ethernet device on its precreated tap, which
    libvirt opens as it is (managed='no': no privileges in the launcher)."""
    wired = InterfacePlan(
        alias="default", backend=NetBackend.ETHERNET, model="virtio", mac="0a:58:c6:12:01:05",
        tap="tap0",
    )  # fmt: skip
    iface = ET.fromstring(build(dataclasses.replace(PLAN, interfaces=(wired,)))).find(
        "devices/interface"
    )
    assert iface is not None and iface.get("type") == "ethernet"
    target = iface.find("target")
    assert target is not None and target.attrib == {"dev": "tap0", "managed": "no"}
    assert iface.find("mac").get("address") == "0a:58:c6:12:01:05"  # type: ignore[union-attr]


def test_passt_binding_is_qemus_stream_netdev_to_the_launchers_passt(tmp_path: Path) -> None:
    """passtBinding is no libvirt interface (libvirt 9.0 has no passt backend): QEMU gets a
    `-netdev stream` to passt's socket and a virtio-net device with the guest's MAC through
    libvirt's qemu:commandline, which libvirt's schema accepts, on PCI slots libvirt does
    not hand out (an unplaced one took the VGA's slot 2); passt forwards every port
    of a protocol, the listed ones, or none of a protocol not listed."""
    every = PasstInterface(
        alias="default", socket=tmp_path / "passt-default.sock", mac="02:00:00:00:00:01",
        forwards=(("tcp", ()), ("udp", ())),
    )  # fmt: skip
    listed = dataclasses.replace(
        every, alias="listed", mac="02:00:00:00:00:03", forwards=(("tcp", (80, 22)),)
    )
    xml = build(dataclasses.replace(PLAN, machine="pc", interfaces=(), passt=(every, listed)))
    dom = ET.fromstring(xml)
    assert dom.findall("devices/interface") == []
    args = [a.get("value") for a in dom.iter(f"{{{QEMU_NS}}}arg")]
    assert args[:4] == [
        "-netdev",
        f"stream,id=passt-default,server=off,addr.type=unix,addr.path={every.socket}",
        "-device",
        "virtio-net-pci,netdev=passt-default,id=passt-default,mac=02:00:00:00:00:01,romfile=,"
        "bus=pci.0,addr=0x1f",
    ]
    assert str(args[7]).endswith(",bus=pci.0,addr=0x1e")  # placed where libvirt places nothing
    assert passt_argv(every)[-4:] == [
        "--tcp-ports",
        "all",
        "--udp-ports",
        "all",
    ]
    assert passt_argv(listed)[-2:] == ["--tcp-ports", "22,80"]
    names = device_names(xml)  # the guest agent's view maps back to the interfaces
    assert names.macs == {"02:00:00:00:00:01": "default", "02:00:00:00:00:03": "listed"}
    assert names.user_nics == {"default", "listed"}
    path = tmp_path / "domain.xml"
    path.write_text(xml)
    result = subprocess.run(
        ["virt-xml-validate", str(path), "domain"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
