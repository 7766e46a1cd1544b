"""Validation of the guest's devices beside disks and interfaces (inputs, watchdog, panic
devices, video, sound), its clock and its features, with KubeVirt's rules: an input is a
tablet or keyboard on usb or virtio; a watchdog is a named i6300esb whose action is
poweroff, reset or shutdown; Hyper-V spinlocks are at least 4096 retries, the vendor id at
most 12 characters, an enlightenment's dependency is not disabled, and hypervPassthrough
excludes naming enlightenments.
"""

from __future__ import annotations

import re

from shared.model._validate_common import Errors, check_name, check_unique_names
from shared.model.domain import DomainSpec, Features
from shared.model.features import FeatureHyperv, is_off, is_on
from shared.model.guestdevices import Clock, Timer

INPUT_TYPES = ("keyboard", "tablet")
INPUT_BUSES = ("usb", "virtio")
WATCHDOG_ACTIONS = ("poweroff", "reset", "shutdown")
# x86's (KubeVirt's pvpanic is PCI pvpanic, which libvirt 9.0 cannot render).
PANIC_MODELS = ("hyperv", "isa")
VIDEO_TYPES = ("bochs", "cirrus", "ramfb", "vga", "virtio")
SOUND_MODELS = ("ac97", "ich9")
TICK_POLICIES = {
    "hpet": ("catchup", "delay", "discard", "merge"),
    "pit": ("catchup", "delay", "discard"),
    "rtc": ("catchup", "delay"),
}
RTC_TRACKS = ("guest", "wall")
MIN_SPINLOCKS = 4096
MAX_VENDOR_ID = 12
# Enlightenment -> the one it needs (KubeVirt's dependencies).
HYPERV_NEEDS = {
    "synic": "vpindex",
    "synictimer": "synic",
    "tlbflush": "vpindex",
    "ipi": "vpindex",
    "evmcs": "vapic",
}
_TIMEZONE = re.compile(r"[A-Za-z0-9_+-]{1,64}(/[A-Za-z0-9_+-]{1,64}){0,3}")


def _one_of(errs: Errors, path: str, value: str | None, allowed: tuple[str, ...]) -> None:
    if value is not None and value != "" and value not in allowed:
        errs.add(path, f"must be one of {', '.join(allowed)}", value)


def validate_devices(errs: Errors, path: str, domain: DomainSpec) -> None:
    """inputs, watchdog, panicDevices, video and sound under `path` (spec.domain)."""
    devices = domain.devices
    dev_path = f"{path}.devices"
    for i, item in enumerate(devices.inputs):
        where = f"{dev_path}.inputs[{i}]"
        check_name(errs, f"{where}.name", item.name)
        if item.type is None or item.type not in INPUT_TYPES:
            errs.add(f"{where}.type", f"must be one of {', '.join(INPUT_TYPES)}", item.type)
        _one_of(errs, f"{where}.bus", item.bus, INPUT_BUSES)
    check_unique_names(errs, f"{dev_path}.inputs", [i.name for i in devices.inputs])
    watchdog = devices.watchdog
    if watchdog is not None:
        where = f"{dev_path}.watchdog"
        check_name(errs, f"{where}.name", watchdog.name)
        if watchdog.i6300esb is None:
            errs.add(f"{where}.i6300esb", "is required: the watchdog's device (i6300esb)")
        else:
            _one_of(errs, f"{where}.i6300esb.action", watchdog.i6300esb.action, WATCHDOG_ACTIONS)
    models: dict[str, int] = {}
    for i, panic in enumerate(devices.panic_devices):
        where = f"{dev_path}.panicDevices[{i}].model"
        _one_of(errs, where, panic.model, PANIC_MODELS)
        model = panic.model or "isa"
        if model in models:
            errs.add(where, f"duplicate panic device model {model!r}", panic.model)
        models[model] = i
    if devices.video is not None:
        _one_of(errs, f"{dev_path}.video.type", devices.video.type, VIDEO_TYPES)
        if devices.extra.get("autoattachGraphicsDevice") is False:
            errs.add(f"{dev_path}.video", "needs a graphics device (autoattachGraphicsDevice)")
    if devices.sound is not None:
        check_name(errs, f"{dev_path}.sound.name", devices.sound.name)
        _one_of(errs, f"{dev_path}.sound.model", devices.sound.model, SOUND_MODELS)


def validate_clock(errs: Errors, path: str, clock: Clock | None) -> None:
    """One of utc and timezone; a timezone the zone database knows; known tick policies."""
    if clock is None:
        return
    where = f"{path}.clock"
    if clock.utc is not None and clock.timezone is not None:
        errs.add(where, "must set at most one of utc, timezone")
    if clock.timezone is not None and not _known_zone(clock.timezone):
        errs.add(
            f"{where}.timezone", "is not a known time zone (e.g. Europe/Paris)", clock.timezone
        )
    if clock.timer is not None:
        _validate_timer(errs, f"{where}.timer", clock.timer)


def _known_zone(name: str) -> bool:
    """A well-formed zone name the zone database (where there is one) has."""
    if not _TIMEZONE.fullmatch(name) or ".." in name:
        return False
    import zoneinfo  # noqa: PLC0415 (here: zoneinfo loads sysconfig, ~1.5 ms of any VMI start)

    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return not zoneinfo.available_timezones()  # no database here: the shape only
    return True


def _validate_timer(errs: Errors, path: str, timer: Timer) -> None:
    for name, item in (("hpet", timer.hpet), ("pit", timer.pit), ("rtc", timer.rtc)):
        if item is not None:
            _one_of(errs, f"{path}.{name}.tickPolicy", item.tick_policy, TICK_POLICIES[name])
    if timer.rtc is not None:
        _one_of(errs, f"{path}.rtc.track", timer.rtc.track, RTC_TRACKS)


def validate_features(errs: Errors, path: str, features: Features) -> None:
    """Hyper-V: spinlocks ≥ 4096, vendorid ≤ 12 characters, no disabled dependency, and
    not both named enlightenments and hypervPassthrough."""
    where = f"{path}.features"
    hyperv = features.hyperv
    if hyperv is None:
        return
    if is_on(features.hyperv_passthrough):
        errs.add(f"{where}.hyperv", "cannot be set with hypervPassthrough enabled")
    spin = hyperv.spinlocks
    if spin is not None and spin.spinlocks is not None and spin.spinlocks < MIN_SPINLOCKS:
        errs.add(
            f"{where}.hyperv.spinlocks.spinlocks",
            f"must be at least {MIN_SPINLOCKS}",
            spin.spinlocks,
        )
    vendor = hyperv.vendorid
    if vendor is not None and vendor.vendorid is not None:
        text = vendor.vendorid
        if not 0 < len(text) <= MAX_VENDOR_ID or not text.isprintable() or "," in text:
            errs.add(
                f"{where}.hyperv.vendorid.vendorid",
                f"must be 1-{MAX_VENDOR_ID} printable characters, no comma",
                vendor.vendorid,
            )
    _hyperv_dependencies(errs, f"{where}.hyperv", hyperv)


def _hyperv_dependencies(errs: Errors, path: str, hyperv: FeatureHyperv) -> None:
    for name, needs in HYPERV_NEEDS.items():
        if is_on(getattr(hyperv, name)) and is_off(getattr(hyperv, needs)):
            errs.add(f"{path}.{name}", f"needs {path}.{needs}, which is disabled")
    tlbflush = hyperv.tlbflush
    if tlbflush is None:
        return
    for mode in ("direct", "extended"):  # modes of tlbflush: not without it
        if is_on(getattr(tlbflush, mode)) and tlbflush.enabled is False:
            errs.add(f"{path}.tlbflush.{mode}", f"needs {path}.tlbflush, which is disabled")
    if is_on(tlbflush.direct) and is_off(hyperv.vapic):  # QEMU's hv-tlbflush-direct
        errs.add(f"{path}.tlbflush.direct", f"needs {path}.vapic, which is disabled")
