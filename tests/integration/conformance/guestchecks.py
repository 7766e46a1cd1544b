"""Conformance checks of the guest's devices, clock, features and console log: each field
of the VMI shows in the domain XML (or the launcher pod) as written."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any

from controller.services.consolelog import GUEST_CONSOLE_LOG_CONTAINER
from shared.model import VirtualMachineInstance

TIMERS = {"hpet": "hpet", "pit": "pit", "rtc": "rtc", "kvm": "kvmclock", "hyperv": "hypervclock"}


def guest_devices(
    vmi: VirtualMachineInstance, dom: ET.Element, pod: dict[str, Any]
) -> Iterator[str]:
    """inputs, watchdog, panic devices, video, sound, balloon, serial console, console log."""
    devices = vmi.spec.domain.devices
    found = {(el.get("type"), el.get("bus")) for el in dom.findall("devices/input")}
    for item in devices.inputs:
        if (item.type, item.bus or "usb") not in found:
            yield f"input {item.name} ({item.type} on {item.bus or 'usb'}) is not in the XML"
    wd = dom.find("devices/watchdog")
    if devices.watchdog is not None and devices.watchdog.i6300esb is not None:
        action = devices.watchdog.i6300esb.action or "reset"
        if wd is None or (wd.get("model"), wd.get("action")) != ("i6300esb", action):
            yield f"watchdog is not i6300esb with action {action}"
    elif wd is not None:
        yield "a watchdog nobody asked for"
    panics = [el.get("model") for el in dom.findall("devices/panic")]
    if panics != [p.model or "isa" for p in devices.panic_devices]:
        yield f"panic devices {panics} do not follow panicDevices"
    video = dom.find("devices/video/model")
    if devices.video is not None and (video is None or video.get("type") != devices.video.type):
        yield f"video is not {devices.video.type}"
    sound = dom.find("devices/sound")
    if devices.sound is not None and (sound is None or sound.get("model") != devices.sound.model):
        yield f"sound is not {devices.sound.model}"
    balloon = dom.find("devices/memballoon")
    off = devices.autoattach_mem_balloon is False
    if balloon is None or (balloon.get("model") == "none") != off:
        yield "memballoon does not follow autoattachMemBalloon"
    if (dom.find("devices/serial") is None) != (devices.autoattach_serial_console is False):
        yield "serial console does not follow autoattachSerialConsole"
    containers = [c["name"] for c in pod["spec"]["containers"]]
    if (GUEST_CONSOLE_LOG_CONTAINER in containers) != bool(devices.log_serial_console):
        yield "guest-console-log container does not follow logSerialConsole"


def guest_clock_features(
    vmi: VirtualMachineInstance, dom: ET.Element, _: dict[str, Any]
) -> Iterator[str]:
    """clock offset, timezone and timers; acpi and apic."""
    clock = vmi.spec.domain.clock
    el = dom.find("clock")
    if clock is not None:
        if el is None:
            yield "no clock in the XML"
            return
        offset = clock.utc.offset_seconds if clock.utc is not None else None
        if offset and el.get("adjustment") != str(offset):
            yield f"clock adjustment {el.get('adjustment')} is not utc.offsetSeconds {offset}"
        if clock.timezone and el.get("timezone") != clock.timezone:
            yield f"clock timezone is not {clock.timezone}"
        timer = clock.timer
        names = {t.get("name") for t in el.findall("timer")}
        for key, name in TIMERS.items():
            if timer is not None and getattr(timer, key) is not None and name not in names:
                yield f"timer {key} is not in the XML"
    features = vmi.spec.domain.features
    acpi_on = features.acpi is None or features.acpi.on
    if acpi_on != (dom.find("features/acpi") is not None):
        yield "features/acpi does not follow features.acpi"
    if (features.apic is not None) != (dom.find("features/apic") is not None):
        yield "features/apic does not follow features.apic"
