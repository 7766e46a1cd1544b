"""A typed builder for libvirt domain XML.

Input is a fully resolved plan (paths on disk, sizes in KiB); the builder only renders it,
through ElementTree, so every user-provided string is escaped and nothing is formatted by
hand. Resolving a VMI into a plan is launcher.plan's job.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from launcher import (
    diskxml,
    guestxml,
    nicxml,
    passt,
    pinning,
    qemuns,
    sysinfo,
    tpm,
    transitional,
    virtiofs,
)
from launcher.domplan import (
    MEMORY_DEVICE_ALIAS,
    CpuMode,
    DiskDevice,
    DiskPlan,
    DomainPlan,
    FirmwarePlan,
    InterfacePlan,
    KernelPlan,
    MemoryHotplugPlan,
    NetBackend,
    Topology,
)
from shared import podlayout

KUBEVIRT_NS = "http://kubevirt.io"

__all__ = [
    "KUBEVIRT_NS",
    "MEMORY_DEVICE_ALIAS",
    "CpuMode",
    "DiskDevice",
    "DiskPlan",
    "DomainPlan",
    "FirmwarePlan",
    "InterfacePlan",
    "KernelPlan",
    "MemoryHotplugPlan",
    "NetBackend",
    "Topology",
    "build",
    "disk_xml",
    "interface_xml",
]


def build(plan: DomainPlan) -> str:
    """Render the plan as domain XML."""
    dom = ET.Element("domain", type=plan.virt_type)
    _text(dom, "name", plan.name)
    _text(dom, "uuid", plan.domain_uuid)
    _metadata(dom, plan)
    hotplug = plan.memory_hotplug
    if hotplug is not None:
        _text(dom, "maxMemory", str(hotplug.max_kib), unit="KiB", slots="1")
    _text(dom, "memory", str(plan.memory_kib), unit="KiB")
    vcpu = _text(dom, "vcpu", str(plan.topology.vcpus), placement="static")
    if plan.vcpus_current is not None and plan.vcpus_current != plan.topology.vcpus:
        vcpu.set("current", str(plan.vcpus_current))
    if plan.iothreads:
        _text(dom, "iothreads", str(plan.iothreads))
    if plan.partition:
        resource = ET.SubElement(dom, "resource")
        _text(resource, "partition", plan.partition)
    _os(dom, plan)
    if plan.has_sysinfo:
        sysinfo.render(
            dom, uuid=plan.smbios_uuid, serial=plan.smbios_serial, chassis=plan.smbios_chassis
        )
    _features(dom, plan)
    cpu = _cpu(dom, plan)
    if plan.pinning is not None:
        pinning.render(dom, cpu, plan.pinning, memory_kib=plan.memory_kib)
    virtiofs.render_backing(dom, plan.filesystems)
    guestxml.clock(dom, plan.extras.clock)
    _text(dom, "on_poweroff", "destroy")
    _text(dom, "on_reboot", "restart")
    _text(dom, "on_crash", "destroy")
    _devices(dom, plan)
    passt.commandline(dom, plan.passt, machine=plan.machine)
    discard = [(f"ua-{d.alias}", d.options.discard_granularity) for d in plan.disks]
    qemuns.override_discard(dom, [(a, g) for a, g in discard if g is not None])
    qemuns.cpu_globals(dom, plan.extras.features.hyperv_cpu_properties)
    ET.indent(dom)
    return ET.tostring(dom, encoding="unicode")


def _text(parent: ET.Element, tag: str, text: str, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, attrs)
    el.text = text
    return el


def _metadata(dom: ET.Element, plan: DomainPlan) -> None:
    meta = ET.SubElement(dom, "metadata")
    # A literal prefix keeps libvirt's stored XML readable (no ns0:).
    kv = ET.SubElement(meta, "kubevirt:kubevirt", {"xmlns:kubevirt": KUBEVIRT_NS})
    _text(kv, "kubevirt:namespace", plan.namespace)
    _text(kv, "kubevirt:name", plan.vmi_name)
    _text(kv, "kubevirt:uid", plan.uuid)


def _os(dom: ET.Element, plan: DomainPlan) -> None:
    os_el = ET.SubElement(dom, "os")
    _text(os_el, "type", "hvm", arch="x86_64", machine=plan.machine)
    fw = plan.firmware
    if fw is not None:
        secure = "yes" if fw.secure else "no"
        _text(os_el, "loader", str(fw.loader), readonly="yes", secure=secure, type="pflash")
        _text(os_el, "nvram", str(fw.nvram), template=str(fw.nvram_template))
    if plan.kernel is not None:
        if plan.kernel.kernel is not None:
            _text(os_el, "kernel", str(plan.kernel.kernel))
        if plan.kernel.initrd is not None:
            _text(os_el, "initrd", str(plan.kernel.initrd))
        _text(os_el, "cmdline", plan.kernel.cmdline)
    sysinfo.render_acpi(os_el, plan.acpi_tables)
    if plan.has_sysinfo:
        ET.SubElement(os_el, "smbios", mode="sysinfo")
    if plan.bios_serial and fw is None:
        ET.SubElement(os_el, "bios", useserial="yes")


def _features(dom: ET.Element, plan: DomainPlan) -> None:
    features = ET.SubElement(dom, "features")
    guestxml.features(features, plan.extras.features)
    if plan.smm:
        ET.SubElement(features, "smm", state="on")
    if plan.virt_type == "qemu" and plan.tb_cache_mib:
        tcg = ET.SubElement(features, "tcg")
        _text(tcg, "tb-cache", str(plan.tb_cache_mib), unit="MiB")


def _cpu(dom: ET.Element, plan: DomainPlan) -> ET.Element:
    cpu = ET.SubElement(dom, "cpu")
    model = plan.cpu_model
    if model is None and (plan.virt_type == "kvm" or plan.cpu_features):
        model = CpuMode.HOST_MODEL  # KubeVirt's default; libvirt wants a model for features
    if model in (CpuMode.HOST_MODEL, CpuMode.HOST_PASSTHROUGH):
        cpu.set("mode", str(model))
    elif model is not None:  # a named model, exactly: no fallback to another
        cpu.set("mode", "custom")
        cpu.set("match", "exact")
        _text(cpu, "model", model, fallback="forbid")
    t = plan.topology
    topology = {"sockets": t.sockets, "dies": 1, "cores": t.cores, "threads": t.threads}
    ET.SubElement(cpu, "topology", {k: str(v) for k, v in topology.items()})
    for name, policy in plan.cpu_features:
        ET.SubElement(cpu, "feature", policy=policy, name=name)
    if plan.memory_hotplug is not None:
        numa = ET.SubElement(cpu, "numa")
        cpus = f"0-{t.vcpus - 1}" if t.vcpus > 1 else "0"
        ET.SubElement(numa, "cell", id="0", cpus=cpus, memory=str(plan.memory_kib), unit="KiB")
    return cpu


def _devices(dom: ET.Element, plan: DomainPlan) -> None:
    devices = ET.SubElement(dom, "devices")
    _text(devices, "emulator", str(plan.emulator))
    for disk in plan.disks:
        _disk(devices, disk)
    # Hotplugged scsi disks need a controller there from the start (KubeVirt's too).
    ET.SubElement(devices, "controller", type="scsi", index="0", model="virtio-scsi")
    nicxml.render_root_ports(devices, plan.pcie_root_ports)
    for iface in plan.interfaces:
        _interface(devices, iface)
    if plan.extras.serial:
        _serial(devices, plan)
    channel = ET.SubElement(devices, "channel", type="unix")
    ET.SubElement(channel, "source", mode="bind", path=str(plan.agent_socket))
    ET.SubElement(channel, "target", type="virtio", name="org.qemu.guest_agent.0")
    if plan.extras.downward_metrics:  # QEMU's end beside the agent's (podlayout)
        socket = plan.agent_socket.with_name(podlayout.DOWNWARD_METRICS_SOCKET_NAME)
        guestxml.vhostmd_channel(devices, socket)
    _graphics(devices, plan.vnc_socket, plan.extras.video_type)
    guestxml.devices(devices, plan.extras)
    if plan.extras.memballoon:
        balloon = ET.SubElement(devices, "memballoon", model="virtio")
        ET.SubElement(balloon, "stats", period="1")
    else:  # libvirt adds one unless told none
        ET.SubElement(devices, "memballoon", model="none")
    if plan.rng:
        rng = ET.SubElement(devices, "rng", model="virtio")
        _text(rng, "backend", "/dev/urandom", model="random")
    if plan.tpm:
        tpm.add_device(devices, persistent=plan.tpm_persistent)
    if plan.memory_hotplug is not None:
        _virtio_mem(devices, plan.memory_hotplug, boot_kib=plan.memory_kib)
    virtiofs.render_devices(devices, plan.filesystems)
    if plan.extras.virtio_transitional:
        transitional.apply(devices)


def _serial(devices: ET.Element, plan: DomainPlan) -> None:
    """The serial console: a Unix socket for interactive use, logged to a file as well."""
    serial = ET.SubElement(devices, "serial", type="unix")
    ET.SubElement(serial, "source", mode="bind", path=str(plan.console_socket))
    ET.SubElement(serial, "log", file=str(plan.serial_log), append="on")
    ET.SubElement(serial, "target", port="0")


def _virtio_mem(devices: ET.Element, hotplug: MemoryHotplugPlan, *, boot_kib: int) -> None:
    mem = ET.SubElement(devices, "memory", model="virtio-mem")
    target = ET.SubElement(mem, "target")
    _text(target, "size", str(hotplug.device_size_kib(boot_kib)), unit="KiB")
    _text(target, "node", "0")
    _text(target, "block", str(hotplug.block_kib), unit="KiB")
    _text(target, "requested", str(hotplug.requested_kib), unit="KiB")
    ET.SubElement(mem, "alias", name=MEMORY_DEVICE_ALIAS)


def disk_xml(disk: DiskPlan) -> str:
    """One disk device on its own (a hotplug's attachDeviceFlags argument)."""
    holder = ET.Element("devices")
    _disk(holder, disk)
    return ET.tostring(holder[0], encoding="unicode")


def interface_xml(iface: InterfacePlan) -> str:
    """One interface device on its own (a NIC hotplug's attachDeviceFlags argument)."""
    holder = ET.Element("devices")
    _interface(holder, iface)
    return ET.tostring(holder[0], encoding="unicode")


def _graphics(devices: ET.Element, vnc_socket: Path | None, video_type: str | None) -> None:
    """KubeVirt's default display: a VGA card (a framebuffer; devices.video names another)
    and QEMU's VNC server on a Unix socket in the pod, which the handler relays; with none,
    no video at all."""
    video = ET.SubElement(devices, "video")
    if vnc_socket is None:
        ET.SubElement(video, "model", type="none")
        return
    graphics = ET.SubElement(devices, "graphics", type="vnc", socket=str(vnc_socket))
    ET.SubElement(graphics, "listen", type="socket", socket=str(vnc_socket))
    guestxml.video_model(video, video_type)


def _disk(devices: ET.Element, disk: DiskPlan) -> None:
    el = ET.SubElement(
        devices, "disk", type="block" if disk.block else "file", device=str(disk.device)
    )
    driver = ET.SubElement(el, "driver", name="qemu", type=disk.format)
    if disk.cache:
        driver.set("cache", disk.cache)
    if disk.source is None:
        pass  # an empty cdrom tray
    elif disk.block:
        ET.SubElement(el, "source", dev=str(disk.source))
    else:
        ET.SubElement(el, "source", file=str(disk.source))
    ET.SubElement(el, "target", dev=disk.target, bus=disk.bus)
    if disk.readonly:
        ET.SubElement(el, "readonly")
    if disk.serial:
        _text(el, "serial", disk.serial)
    if disk.boot_order is not None:
        ET.SubElement(el, "boot", order=str(disk.boot_order))
    diskxml.render(el, driver, disk.options)
    ET.SubElement(el, "alias", name=f"ua-{disk.alias}")


def _interface(devices: ET.Element, iface: InterfacePlan) -> None:
    el = ET.SubElement(devices, "interface", type=str(iface.backend))
    if iface.mac:
        ET.SubElement(el, "mac", address=iface.mac)
    if iface.tap:
        ET.SubElement(el, "target", dev=iface.tap, managed="no")
    ET.SubElement(el, "model", type=iface.model)
    ET.SubElement(el, "rom", enabled="no")
    nicxml.render(el, iface.options)
    ET.SubElement(el, "alias", name=f"ua-{iface.alias}")
