"""The domain XML of the guest's clock, features and emulated devices beside disks and
interfaces (inputs, watchdog, panic devices, sound), from a resolved `GuestExtras` plan
(launcher/guestplan.py makes it from the VMI). Rendered with ElementTree, like domxml.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True, kw_only=True)
class TimerPlan:
    """One <timer>: libvirt's name (hpet, pit, rtc, kvmclock, hypervclock)."""

    name: str
    present: bool | None = None
    tickpolicy: str | None = None
    track: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClockPlan:
    """<clock>: utc (with an adjustment in seconds: offset 'variable') or a timezone."""

    adjustment: int | None = None
    timezone: str | None = None
    timers: tuple[TimerPlan, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class HypervFlag:
    """One Hyper-V enlightenment: its libvirt element, on/off and extra attributes; the
    stimer's direct mode as a child."""

    element: str
    on: bool
    attrs: tuple[tuple[str, str], ...] = ()
    direct: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FeaturesPlan:
    """<features> beside smm and tcg; None: not rendered (the machine type decides)."""

    acpi: bool = True
    apic: bool | None = None
    apic_eoi: bool | None = None
    hyperv: tuple[HypervFlag, ...] = ()
    hyperv_cpu_properties: tuple[str, ...] = ()  # QEMU's, beyond libvirt's (qemuns.py)
    hyperv_passthrough: bool = False
    kvm_hidden: bool | None = None
    pvspinlock: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InputPlan:
    alias: str
    type: str
    bus: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchdogPlan:
    alias: str
    action: str
    model: str = "i6300esb"


@dataclass(frozen=True, slots=True, kw_only=True)
class SoundPlan:
    alias: str
    model: str


@dataclass(frozen=True, slots=True, kw_only=True)
class GuestExtras:
    """Everything a VMI asks of the guest beside disks, interfaces and the firmware; the
    defaults are a VMI that asks nothing (KubeVirt's defaults)."""

    clock: ClockPlan | None = None
    features: FeaturesPlan = field(default_factory=FeaturesPlan)
    inputs: tuple[InputPlan, ...] = ()
    watchdog: WatchdogPlan | None = None
    panic_models: tuple[str, ...] = ()
    video_type: str | None = None  # None: vga (with graphics), none (without)
    sound: SoundPlan | None = None
    memballoon: bool = True
    serial: bool = True  # autoattachSerialConsole
    virtio_transitional: bool = False  # useVirtioTransitional (launcher/transitional.py)
    hotplug: bool = True  # disableHotplug false: spare root ports for hotplugged disks
    vsock_cid: int | None = None  # autoattachVSOCK: the CID the handler allocated
    downward_metrics: bool = False  # devices.downwardMetrics: the vhostmd channel


def _state(on: bool) -> str:
    return "on" if on else "off"


def clock(dom: ET.Element, plan: ClockPlan | None) -> None:
    """<clock>; nothing when the VMI has no clock (libvirt's default: utc)."""
    if plan is None:
        return
    if plan.timezone is not None:
        el = ET.SubElement(dom, "clock", offset="timezone", timezone=plan.timezone)
    elif plan.adjustment:
        el = ET.SubElement(dom, "clock", offset="variable", adjustment=str(plan.adjustment))
        el.set("basis", "utc")
    else:
        el = ET.SubElement(dom, "clock", offset="utc")
    for timer in plan.timers:
        t = ET.SubElement(el, "timer", name=timer.name)
        if timer.tickpolicy:
            t.set("tickpolicy", timer.tickpolicy)
        if timer.track:
            t.set("track", timer.track)
        if timer.present is not None:
            t.set("present", "yes" if timer.present else "no")


def features(parent: ET.Element, plan: FeaturesPlan) -> None:
    """acpi, apic, hyperv, kvm and pvspinlock into <features>, in libvirt's order."""
    if plan.acpi:
        ET.SubElement(parent, "acpi")
    if plan.apic is not None:
        apic = ET.SubElement(parent, "apic")
        if plan.apic_eoi is not None:
            apic.set("eoi", _state(plan.apic_eoi))
    if plan.hyperv_passthrough:
        ET.SubElement(parent, "hyperv", mode="passthrough")
    elif plan.hyperv:
        hyperv = ET.SubElement(parent, "hyperv", mode="custom")
        for flag in plan.hyperv:
            el = ET.SubElement(hyperv, flag.element, state=_state(flag.on))
            for key, value in flag.attrs:
                el.set(key, value)
            if flag.direct is not None:
                ET.SubElement(el, "direct", state=_state(flag.direct))
    if plan.kvm_hidden is not None:
        ET.SubElement(ET.SubElement(parent, "kvm"), "hidden", state=_state(plan.kvm_hidden))
    if plan.pvspinlock is not None:
        ET.SubElement(parent, "pvspinlock", state=_state(plan.pvspinlock))


def devices(parent: ET.Element, extras: GuestExtras) -> None:
    """inputs, watchdog, panic devices, sound and vsock into <devices>."""
    for item in extras.inputs:
        el = ET.SubElement(parent, "input", type=item.type, bus=item.bus)
        ET.SubElement(el, "alias", name=f"ua-{item.alias}")
    if extras.watchdog is not None:
        wd = extras.watchdog
        el = ET.SubElement(parent, "watchdog", model=wd.model, action=wd.action)
        ET.SubElement(el, "alias", name=f"ua-{wd.alias}")
    for model in extras.panic_models:
        ET.SubElement(parent, "panic", model=model)
    if extras.sound is not None:
        el = ET.SubElement(parent, "sound", model=extras.sound.model)
        ET.SubElement(el, "alias", name=f"ua-{extras.sound.alias}")
    if extras.vsock_cid is not None:
        el = ET.SubElement(parent, "vsock", model="virtio")
        ET.SubElement(el, "cid", auto="no", address=str(extras.vsock_cid))


# Video models whose framebuffer size libvirt takes (vram, KiB).
VRAM_MODELS = frozenset({"vga", "cirrus"})


# The virtio-serial port vm-dump-metrics reads (KubeVirt's and vhostmd's name).
VHOSTMD_PORT = "org.github.vhostmd.1"


def vhostmd_channel(devices: ET.Element, socket: Path) -> None:
    """devices.downwardMetrics: the port, QEMU listening on `socket` (the handler dials)."""
    channel = ET.SubElement(devices, "channel", type="unix")
    ET.SubElement(channel, "source", mode="bind", path=str(socket))
    ET.SubElement(channel, "target", type="virtio", name=VHOSTMD_PORT)


def video_model(video: ET.Element, video_type: str | None) -> None:
    """<model> of the one video card: vga unless the VMI names a type."""
    kind = video_type or "vga"
    model = ET.SubElement(video, "model", type=kind)
    if kind in VRAM_MODELS:
        model.set("vram", "16384")
    model.set("heads", "1")
