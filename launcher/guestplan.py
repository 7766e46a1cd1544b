"""From a VMI to its `GuestExtras` (launcher/guestxml.py): clock, features, inputs,
watchdog, panic devices, video, sound, the balloon and the serial console.

Settings only KVM can run (the Hyper-V enlightenments and clock, kvmclock, kvm.hidden,
pvspinlock, a Hyper-V panic device) are refused on a node whose guests run under
emulation (TCG): `HypervisorUnsupported` names each field and the node, and the handler
fails the VMI with it, rather than the domain starting without them.
"""

from __future__ import annotations

from launcher.errors import HypervisorUnsupported, InvalidSpec
from launcher.guestxml import (
    ClockPlan,
    FeaturesPlan,
    GuestExtras,
    HypervFlag,
    InputPlan,
    SoundPlan,
    TimerPlan,
    WatchdogPlan,
)
from shared.model import VirtualMachineInstance
from shared.model.domain import Devices, Features
from shared.model.features import FeatureHyperv, is_on
from shared.model.guestdevices import Clock

# KubeVirt's field name -> libvirt's element, in libvirt's order.
HYPERV_ELEMENTS = (
    ("relaxed", "relaxed"), ("vapic", "vapic"), ("spinlocks", "spinlocks"),
    ("vpindex", "vpindex"), ("runtime", "runtime"), ("synic", "synic"),
    ("synictimer", "stimer"), ("reset", "reset"), ("vendorid", "vendor_id"),
    ("frequencies", "frequencies"), ("reenlightenment", "reenlightenment"),
    ("tlbflush", "tlbflush"), ("ipi", "ipi"), ("evmcs", "evmcs"),
)  # fmt: skip
# An enlightenment -> the one it needs, enabled with it when left unset (KubeVirt's).
HYPERV_NEEDS = {"synic": "vpindex", "synictimer": "synic", "tlbflush": "vpindex",
                "ipi": "vpindex", "evmcs": "vapic"}  # fmt: skip
# tlbflush's modes: QEMU CPU properties (libvirt 9.1's <direct/>, <extended/>).
TLBFLUSH_DIRECT, TLBFLUSH_EXTENDED = "hv-tlbflush-direct", "hv-tlbflush-ext"
DEFAULT_SPINLOCKS = 4096
DEFAULT_WATCHDOG_ACTION = "reset"
VSOCK_FIRST_CID = 3  # 0-2: hypervisor, loopback, host (handler/vsock.py allocates)
DEFAULT_INPUT_BUS = "usb"
DEFAULT_SOUND_MODEL = "ich9"
DEFAULT_PANIC_MODEL = "isa"
# autoattachInputDevice's tablet (KubeVirt's name for it).
AUTO_INPUT = InputPlan(alias="default-0", type="tablet", bus=DEFAULT_INPUT_BUS)


def guest_extras(vmi: VirtualMachineInstance) -> GuestExtras:
    """Everything beyond disks, interfaces and firmware the VMI asks of the guest."""
    domain = vmi.spec.domain
    devices = domain.devices
    return GuestExtras(
        clock=clock_plan(domain.clock),
        features=features_plan(domain.features),
        inputs=_inputs(devices),
        watchdog=_watchdog(devices),
        panic_models=tuple(p.model or DEFAULT_PANIC_MODEL for p in devices.panic_devices),
        video_type=(devices.video.type or None) if devices.video is not None else None,
        sound=_sound(devices),
        memballoon=devices.autoattach_mem_balloon is not False,
        serial=devices.autoattach_serial_console is not False,
        virtio_transitional=bool(devices.use_virtio_transitional),
        hotplug=not devices.disable_hotplug,
        vsock_cid=_vsock_cid(vmi),
        downward_metrics=devices.downward_metrics is not None,
    )


def _vsock_cid(vmi: VirtualMachineInstance) -> int | None:
    """autoattachVSOCK's CID, from the status the handler wrote (handler/vsock.py)."""
    if not vmi.spec.domain.devices.autoattach_vsock:
        return None
    cid = vmi.status.vsock_cid
    if cid is None or cid < VSOCK_FIRST_CID:
        raise InvalidSpec(
            "spec.domain.devices.autoattachVSOCK: the VMI has no vsock CID of this node's "
            f"handler (status.VSOCKCID is {cid})"
        )
    return cid


def _inputs(devices: Devices) -> tuple[InputPlan, ...]:
    inputs = tuple(
        InputPlan(alias=i.name or "", type=i.type or "", bus=i.bus or DEFAULT_INPUT_BUS)
        for i in devices.inputs
    )
    if not inputs and devices.autoattach_input_device:
        return (AUTO_INPUT,)
    return inputs


def _watchdog(devices: Devices) -> WatchdogPlan | None:
    wd = devices.watchdog
    if wd is None or wd.i6300esb is None:
        return None
    return WatchdogPlan(alias=wd.name or "", action=wd.i6300esb.action or DEFAULT_WATCHDOG_ACTION)


def _sound(devices: Devices) -> SoundPlan | None:
    sound = devices.sound
    if sound is None:
        return None
    return SoundPlan(alias=sound.name or "", model=sound.model or DEFAULT_SOUND_MODEL)


def clock_plan(clock: Clock | None) -> ClockPlan | None:
    """<clock> of a VMI's clock: utc (offsetSeconds as an adjustment) or a timezone."""
    if clock is None:
        return None
    timers: list[TimerPlan] = []
    t = clock.timer
    if t is not None:
        for name, item in (("hpet", t.hpet), ("pit", t.pit), ("rtc", t.rtc)):
            if item is not None:
                track = t.rtc.track if name == "rtc" and t.rtc is not None else None
                timers.append(
                    TimerPlan(
                        name=name, present=item.present, tickpolicy=item.tick_policy, track=track
                    )
                )
        for name, present in (("kvmclock", t.kvm), ("hypervclock", t.hyperv)):
            if present is not None:
                timers.append(TimerPlan(name=name, present=present.present is not False))
    offset = clock.utc.offset_seconds if clock.utc is not None else None
    return ClockPlan(adjustment=offset, timezone=clock.timezone, timers=tuple(timers))


def features_plan(features: Features) -> FeaturesPlan:
    """<features> of a VMI's features (acpi on unless disabled, as KubeVirt)."""
    apic = features.apic
    return FeaturesPlan(
        acpi=features.acpi is None or features.acpi.on,
        apic=None if apic is None else apic.enabled is not False,
        apic_eoi=apic.end_of_interrupt if apic is not None else None,
        hyperv=hyperv_flags(features.hyperv) if features.hyperv is not None else (),
        hyperv_cpu_properties=tlbflush_properties(features.hyperv),
        hyperv_passthrough=is_on(features.hyperv_passthrough),
        kvm_hidden=features.kvm.hidden if features.kvm is not None else None,
        pvspinlock=None if features.pvspinlock is None else features.pvspinlock.on,
    )


def tlbflush_properties(hyperv: FeatureHyperv | None) -> tuple[str, ...]:
    """QEMU's CPU properties of tlbflush's enabled modes (tlbflush itself on)."""
    tlbflush = hyperv.tlbflush if hyperv is not None else None
    if tlbflush is None or not is_on(tlbflush):
        return ()
    modes = ((tlbflush.direct, TLBFLUSH_DIRECT), (tlbflush.extended, TLBFLUSH_EXTENDED))
    return tuple(prop for mode, prop in modes if is_on(mode))


def hyperv_flags(hyperv: FeatureHyperv) -> tuple[HypervFlag, ...]:
    """Each enlightenment set, plus the unset dependencies of enabled ones (on)."""
    wanted = {key for key, _ in HYPERV_ELEMENTS if getattr(hyperv, key) is not None}
    todo = [key for key in wanted if is_on(getattr(hyperv, key))]
    if TLBFLUSH_DIRECT in tlbflush_properties(hyperv):
        wanted.add("vapic")  # QEMU's dependency of hv-tlbflush-direct (set: as written)
    while todo:  # left unset: on; set: as written (validation refuses off)
        need = HYPERV_NEEDS.get(todo.pop())
        if need is not None and need not in wanted:
            wanted.add(need)
            todo.append(need)
    flags = []
    for key, element in HYPERV_ELEMENTS:
        if key not in wanted:
            continue
        switch = getattr(hyperv, key)
        on = switch is None or switch.enabled is not False
        attrs: tuple[tuple[str, str], ...] = ()
        direct = None
        if key == "spinlocks" and on:
            retries = hyperv.spinlocks.spinlocks if hyperv.spinlocks is not None else None
            attrs = (("retries", str(retries or DEFAULT_SPINLOCKS)),)
        elif key == "vendorid" and on and hyperv.vendorid is not None:
            attrs = (("value", hyperv.vendorid.vendorid or ""),)
        elif key == "synictimer" and hyperv.synictimer is not None:
            sub = hyperv.synictimer.direct
            direct = None if sub is None else sub.enabled is not False
        flags.append(HypervFlag(element=element, on=on, attrs=attrs, direct=direct))
    return tuple(flags)


def kvm_only_fields(vmi: VirtualMachineInstance) -> list[str]:
    """The fields of `vmi` that only KVM can run (enabled ones only)."""
    domain = vmi.spec.domain
    f = domain.features
    found = []
    if f.hyperv is not None and any(fl.on for fl in hyperv_flags(f.hyperv)):
        found.append("spec.domain.features.hyperv")
    for name, on in (
        ("hypervPassthrough", is_on(f.hyperv_passthrough)),
        ("kvm", f.kvm is not None and f.kvm.hidden is True),
        ("pvspinlock", f.pvspinlock is not None and f.pvspinlock.on),
    ):
        if on:
            found.append(f"spec.domain.features.{name}")
    timer = domain.clock.timer if domain.clock is not None else None
    if timer is not None:
        for name, item in (("kvm", timer.kvm), ("hyperv", timer.hyperv)):
            if item is not None and item.present is not False:
                found.append(f"spec.domain.clock.timer.{name}")
    for i, panic in enumerate(domain.devices.panic_devices):
        if panic.model == "hyperv":
            found.append(f"spec.domain.devices.panicDevices[{i}].model")
    return found


def require_runnable(vmi: VirtualMachineInstance, *, virt_type: str, node: str) -> None:
    """HypervisorUnsupported naming every KVM-only field when this node emulates."""
    if virt_type == "kvm":
        return
    fields = kvm_only_fields(vmi)
    if not fields:
        return
    where = f"node {node}" if node else "this node"
    message = f"{', '.join(fields)}: needs KVM, but {where} runs guests under emulation (TCG)"
    raise HypervisorUnsupported(
        message,
        {"node": node, "fields": [{"path": p, "message": "needs KVM"} for p in fields]},
    )
