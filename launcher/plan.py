"""From a validated VMI to a DomainPlan: resolve disks, kernel, interfaces and sizes.

Validation happens first and refuses the whole spec with every problem listed, before any
file is made or libvirt is called. Each volume is resolved by its source's module
(launcher/volumes); a start that fails part-way removes the disk files it made.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import structlog

from launcher import (
    cdrom,
    disks,
    diskxml,
    firmware,
    guestplan,
    lun,
    pinning,
    sysinfo,
    tcgthreads,
    virtiofs,
    vmstate,
    volumes,
)
from launcher.domxml import (
    DiskPlan,
    DomainPlan,
    KernelPlan,
    MemoryHotplugPlan,
    Topology,
)
from launcher.errors import InvalidSpec
from launcher.nicplan import interface_plans, passt_interfaces, root_ports
from shared import podnet
from shared import vmstate as shared_vmstate
from shared.model import Disk, VirtualMachineInstance
from shared.model.errors import ModelError
from shared.model.quantity import parse_bytes
from shared.model.validation import validate_vmi

log = structlog.get_logger("launcher.plan")


@dataclass(frozen=True, slots=True, kw_only=True)
class HostPaths:
    """Per-launcher locations that end up in the domain XML."""

    serial_log: Path
    console_socket: Path
    agent_socket: Path
    partition: str | None
    vnc_socket: Path | None = None
    network_file: Path | None = None  # virt-handler's pod wiring (shared/podnet.py)
    # QEMU with single-threaded TCG (launcher/tcgthreads.py), for domains that may gain vCPUs.
    tcg_single_emulator: Path | None = None
    node_name: str = ""  # named when the node cannot run what the VMI asks (guestplan.py)
    # Persistent TPM / EFI state (launcher/vmstate.py): the claim's mount, libvirt's swtpm dir.
    vm_state: Path = Path(str(shared_vmstate.MOUNT_DIR))
    swtpm_storage: Path | None = None
    host_view: pinning.HostView = field(default_factory=pinning.HostView)  # its cpuset, cells


def parse_vmi(raw: object) -> VirtualMachineInstance:
    """Parse and validate; InvalidSpec lists every problem with its field path."""
    if not isinstance(raw, dict):
        raise InvalidSpec("the VMI must be a map", {"fields": [{"path": "vmi"}]})
    try:
        vmi = VirtualMachineInstance.from_dict(raw)
    except ModelError as exc:
        raise InvalidSpec(
            str(exc), {"fields": [{"path": getattr(exc, "path", ""), "message": str(exc)}]}
        ) from exc
    problems = validate_vmi(vmi)
    if problems:
        fields = [{"path": p.path, "message": p.message} for p in problems]
        summary = "; ".join(f"{p.path}: {p.message}" for p in problems)
        raise InvalidSpec(f"invalid VMI: {summary}", {"fields": fields})
    return vmi


def device_name(prefix: str, index: int) -> str:
    """The index-th device name of a prefix, as Linux and libvirt count them:
    vda … vdz, vdaa … vdaz, vdba … (index 0 is vda)."""
    letters = ""
    n = index + 1
    while n:
        n, rem = divmod(n - 1, 26)
        letters = chr(ord("a") + rem) + letters
    return prefix + letters


def _target(bus: str, counters: dict[str, int]) -> str:
    prefix = "vd" if bus == "virtio" else "sd"
    index = counters.get(prefix, 0)
    counters[prefix] = index + 1
    return device_name(prefix, index)


async def _disks(vmi: VirtualMachineInstance, ctx: disks.DiskContext) -> tuple[DiskPlan, ...]:
    """Every disk resolved in spec order. Should one fail, the files this start made for
    the others are removed again (a retried start makes them afresh)."""
    indexed = {v.name: (i, v) for i, v in enumerate(vmi.spec.volumes)}
    counters: dict[str, int] = {}
    plans = []
    created: list[Path] = []
    try:
        for disk in vmi.spec.domain.devices.disks:
            index, volume = indexed.get(disk.name, (-1, None))
            if volume is None or volume.is_hotplug:
                # attached live once the handler made it reachable (hotplug.py); a cdrom
                # is there from the start, its tray empty until then (or for good)
                if disk.is_cdrom:
                    target = _target(disk.effective_bus, counters)
                    plans.append(cdrom.empty_plan(disk, target=target))
                continue
            req = volumes.VolumeRequest(
                vmi=vmi, name=volume.name or "", ctx=ctx, field=f"spec.volumes[{index}]"
            )
            resolved = await volumes.resolve(req, volume.source())
            created += resolved.created
            plans.append(_disk_plan(vmi, disk, resolved, counters, index=index))
    except BaseException:
        for path in created:
            path.unlink(missing_ok=True)
        raise
    return _with_threads(vmi, plans)


def _with_threads(vmi: VirtualMachineInstance, plans: list[DiskPlan]) -> tuple[DiskPlan, ...]:
    """Each virtio disk's I/O thread, as ioThreadsPolicy and dedicatedIOThread say."""
    domain = vmi.spec.domain
    pool = domain.io_threads.supplemental_pool_thread_count if domain.io_threads else None
    _, options = diskxml.assign_threads(
        [(p.bus == "virtio", p.options) for p in plans],
        policy=domain.io_threads_policy, pool=pool, vcpus=domain.vcpus(),
    )  # fmt: skip
    return tuple(replace(p, options=o) for p, o in zip(plans, options, strict=True))


def iothread_count(vmi: VirtualMachineInstance, plans: tuple[DiskPlan, ...]) -> int:
    """The domain's I/O threads: the highest a disk uses, or the whole pool."""
    domain = vmi.spec.domain
    pool = domain.io_threads.supplemental_pool_thread_count if domain.io_threads else None
    used = max((p.options.iothread or 0 for p in plans), default=0)
    return max(used, pool or 0) if domain.io_threads_policy else used


def _check_shareable(disk: Disk, resolved: volumes.ResolvedDisk, *, index: int) -> None:
    """libvirt shares only raw images (a claim, a hostDisk): a shareable disk of another
    format (an emptyDisk's or containerDisk's qcow2) is refused naming the field."""
    if disk.shareable and resolved.format != "raw":
        field = f"spec.domain.devices.disks[{index}].shareable"
        message = f"needs a raw volume (a claim or hostDisk), not {resolved.format}"
        raise InvalidSpec(f"{field}: {message}", {"fields": [{"path": field, "message": message}]})


def _cache(disk: Disk, resolved: volumes.ResolvedDisk, *, index: int) -> str | None:
    """disks[].cache, else none for io native, else the volume's; cache none on a file
    without O_DIRECT is refused naming the field (KubeVirt's rule)."""
    cache = disk.cache or ("none" if disk.io == "native" else None) or resolved.cache
    if disk.cache == "none" and not resolved.block and not disks.direct_io(resolved.path):
        field = f"spec.domain.devices.disks[{index}].cache"
        message = f"{resolved.path} does not support direct I/O, which cache none needs"
        raise InvalidSpec(f"{field}: {message}", {"fields": [{"path": field, "message": message}]})
    return cache


def _disk_plan(
    vmi: VirtualMachineInstance,
    disk: Disk,
    resolved: volumes.ResolvedDisk,
    counters: dict[str, int],
    *,
    index: int,
) -> DiskPlan:
    _check_shareable(disk, resolved, index=index)
    bus = disk.effective_bus
    cdrom_ro = disk.is_cdrom and (disk.cdrom is None or disk.cdrom.readonly is not False)
    options = diskxml.options_of(
        disk, source=resolved.path, block=resolved.block, vcpus=vmi.spec.domain.vcpus(),
        multi_queue=vmi.spec.domain.devices.block_multi_queue is True,
    )  # fmt: skip
    return DiskPlan(
        alias=disk.name or "",
        device=lun.device(disk),
        bus=bus,
        target=_target(bus, counters),
        source=resolved.path,
        format=resolved.format,
        readonly=cdrom_ro or lun.readonly(disk) or resolved.readonly,
        boot_order=disk.boot_order,
        serial=disk.serial,
        shared=resolved.shared,
        cache=_cache(disk, resolved, index=index),
        block=resolved.block,
        options=options,
    )


def _wiring(host: HostPaths) -> podnet.PodWiring | None:
    """virt-handler's wiring of this pod; None (user-mode masquerade) when it wrote none."""
    wiring = podnet.read(host.network_file) if host.network_file is not None else None
    if wiring is None:
        log.warning("pod_network_unwired", why="virt-handler wrote no pod wiring")
    elif wiring.user_mode_reason:
        log.warning("pod_network_user_mode", reason=wiring.user_mode_reason)
    return wiring


def _kernel(vmi: VirtualMachineInstance, ctx: disks.DiskContext) -> KernelPlan | None:
    boot = vmi.spec.domain.kernel_boot
    if boot is None or boot.container is None:
        return None
    c = boot.container
    kernel, initrd = disks.kernel_boot_files(
        ctx,
        kernel=c.kernel_path or None,
        initrd=c.initrd_path or None,
        field="spec.domain.firmware.kernelBoot.container",
        image=c.image or "",
    )
    return KernelPlan(kernel=kernel, initrd=initrd, cmdline=boot.kernel_args or "")


async def plan_domain(
    vmi: VirtualMachineInstance, *, ctx: disks.DiskContext, host: HostPaths, virt_type: str
) -> DomainPlan:
    """Resolve everything the domain XML needs; makes disk files as a side effect."""
    domain = vmi.spec.domain
    cpu = domain.cpu
    memory = domain.guest_memory_bytes() or 0
    guestplan.require_runnable(vmi, virt_type=virt_type, node=host.node_name)
    state = vmstate.prepare(vmi, state_dir=host.vm_state, swtpm=host.swtpm_storage, ctx=ctx)
    uefi = firmware.firmware_plan(vmi, work_dir=ctx.work_dir, nvram=state.nvram)  # before disks
    planned = await _disks(vmi, ctx)
    lun.check(vmi, planned, node=host.node_name)
    plan = DomainPlan(
        name=f"{vmi.metadata.namespace}_{vmi.metadata.name}",
        uuid=vmi.metadata.uid or "",
        namespace=vmi.metadata.namespace or "",
        vmi_name=vmi.metadata.name or "",
        virt_type=virt_type,
        machine=firmware.machine_type(vmi),
        memory_kib=memory // 1024,
        topology=topology(vmi),
        vcpus_current=vcpus_current(vmi),
        emulator=emulator(vmi, host=host, virt_type=virt_type),
        memory_hotplug=memory_hotplug(vmi),
        kernel=_kernel(vmi, ctx),
        disks=planned,
        iothreads=iothread_count(vmi, planned),
        interfaces=interface_plans(vmi, _wiring(host)),
        passt=passt_interfaces(
            vmi, socket_dir=host.console_socket.parent, keep_addresses=ctx.incoming
        ),
        serial_log=host.serial_log,
        console_socket=host.console_socket,
        agent_socket=host.agent_socket,
        partition=host.partition,
        firmware=uefi,
        smm=domain.features.smm_on,
        bios_serial=_bios_serial(vmi),
        cpu_model=cpu.model,
        cpu_features=cpu_features(vmi),
        rng=domain.devices.rng is not None,
        tpm=domain.devices.tpm is not None and domain.devices.tpm.on,
        tpm_persistent=state.tpm_persistent,
        smbios_uuid=domain.firmware.uuid,
        smbios_serial=domain.firmware.serial,
        smbios_chassis=domain.chassis.entries() if domain.chassis is not None else (),
        acpi_tables=sysinfo.acpi_tables(vmi, ctx),
        vnc_socket=host.vnc_socket if graphics_attached(vmi) else None,
        extras=guestplan.guest_extras(vmi),
        pinning=pinning.plan_pinning(
            vmi, view=host.host_view, vcpus=topology(vmi).vcpus, node=host.node_name
        ),
        filesystems=await virtiofs.prepare(vmi),
    )
    return replace(plan, pcie_root_ports=root_ports(plan))


def topology(vmi: VirtualMachineInstance) -> Topology:
    """The domain's CPU topology: maxSockets sockets when CPU hotplug is on (maxSockets
    above sockets), the vCPUs beyond the spec's offline (vcpus_current)."""
    cpu = vmi.spec.domain.cpu
    sockets = max(cpu.sockets or 1, cpu.max_sockets or 0)
    return Topology(sockets=sockets, cores=cpu.cores or 1, threads=cpu.threads or 1)


def cpu_features(vmi: VirtualMachineInstance) -> tuple[tuple[str, str], ...]:
    """cpu.features as (name, libvirt policy); unset policies are require (KubeVirt's)."""
    features = vmi.spec.domain.cpu.features
    return tuple((f.name or "", f.policy or "require") for f in features)


def vcpus_current(vmi: VirtualMachineInstance) -> int | None:
    """The vCPUs online at start when the topology has room for more; None: all."""
    cpu = vmi.spec.domain.cpu
    return cpu.vcpus() if (cpu.max_sockets or 0) > (cpu.sockets or 1) else None


def emulator(vmi: VirtualMachineInstance, *, host: HostPaths, virt_type: str) -> Path:
    """QEMU, or for an emulated domain with room for more vCPUs the wrapper that runs it
    with single-threaded TCG (launcher/tcgthreads.py: QEMU 7.2's MTTCG aborts a hot-add)."""
    grows = tcgthreads.needed(
        virt_type=virt_type, vcpus_max=topology(vmi).vcpus, vcpus_current=vcpus_current(vmi)
    )
    wrapper = host.tcg_single_emulator
    return wrapper if grows and wrapper is not None else tcgthreads.QEMU


BLOCK_KIB = 2048  # virtio-mem's block: sizes are whole blocks (KubeVirt's 2Mi too)


def memory_hotplug(vmi: VirtualMachineInstance) -> MemoryHotplugPlan | None:
    """A virtio-mem device of maxGuest - guest (whole blocks) when maxGuest is above the
    guest memory; nothing plugged at start."""
    memory = vmi.spec.domain.memory
    if memory.max_guest is None:
        return None
    boot_kib = (vmi.spec.domain.guest_memory_bytes() or 0) // 1024
    room = (parse_bytes(memory.max_guest) // 1024 - boot_kib) // BLOCK_KIB * BLOCK_KIB
    if room <= 0:
        return None
    return MemoryHotplugPlan(max_kib=boot_kib + room, requested_kib=0, block_kib=BLOCK_KIB)


def graphics_attached(vmi: VirtualMachineInstance) -> bool:
    """devices.autoattachGraphicsDevice, true unless set false (KubeVirt's default)."""
    return vmi.spec.domain.devices.extra.get("autoattachGraphicsDevice") is not False


def _bios_serial(vmi: VirtualMachineInstance) -> bool:
    """bootloader.bios.useSerial: SeaBIOS prints on the serial console too."""
    loader = vmi.spec.domain.firmware.bootloader
    return bool(loader is not None and loader.bios is not None and loader.bios.use_serial)
