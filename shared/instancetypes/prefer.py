"""A preference applied to a VMI spec (KubeVirt's pkg/instancetype/preference/apply):
each preferred value lands where the template left the field unset (preferredAcpi and
preferredDisableHotplug always, as KubeVirt's). Works on wire dicts: the preference's
`to_dict()` and the VMI spec being expanded (`Target`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.instancetypes.target import Origin, Source, Target, dig
from shared.model._codec import copy_json
from shared.model.preference import PreferenceSpec

# (preference spec.devices key, VMI spec.domain.devices key), set when the VMI's is unset.
DEVICE_DEFAULTS = (
    ("preferredUseVirtioTransitional", "useVirtioTransitional"),
    ("preferredBlockMultiQueue", "blockMultiQueue"),
    ("preferredNetworkInterfaceMultiQueue", "networkInterfaceMultiqueue"),
    ("preferredRng", "rng"),
    ("preferredTPM", "tpm"),
    ("preferredAutoattachGraphicsDevice", "autoattachGraphicsDevice"),
    ("preferredAutoattachMemBalloon", "autoattachMemBalloon"),
    ("preferredAutoattachPodInterface", "autoattachPodInterface"),
    ("preferredAutoattachSerialConsole", "autoattachSerialConsole"),
    ("preferredAutoattachInputDevice", "autoattachInputDevice"),
)
# (preference spec.features key, VMI spec.domain.features key), set when unset.
FEATURE_DEFAULTS = (
    ("preferredApic", "apic"),
    ("preferredKvm", "kvm"),
    ("preferredPvspinlock", "pvspinlock"),
    ("preferredSmm", "smm"),
)
# An interface's binding method keys: none set means the preferred masquerade applies.
BINDINGS = ("bridge", "slirp", "masquerade", "sriov", "macvtap", "passt", "passtBinding", "binding")


def _origin(*keys: str) -> Origin:
    return Origin(source=Source.PREFERENCE, field=".".join(("spec", *keys)))


def _fill(
    target: Target, obj: dict[str, Any], key: str, value: Any, *, at: str, origin: Origin
) -> None:
    """obj[key] = value when the preference has one and obj has none; `at` is its path."""
    if value is None or value == "" or obj.get(key) not in (None, ""):
        return
    obj[key] = copy_json(value)
    target.note(f"{at}.{key}", origin)


def _devices(target: Target, prefs: Mapping[str, Any]) -> None:
    for pref_key, key in DEVICE_DEFAULTS:
        value = prefs.get(pref_key)
        if value is not None and target.get("domain", "devices", key) is None:
            target.put(("domain", "devices", key), value, _origin("devices", pref_key))
    hotplug = prefs.get("preferredDisableHotplug")
    if hotplug is not None:
        origin = _origin("devices", "preferredDisableHotplug")
        target.put(("domain", "devices", "disableHotplug"), hotplug, origin)
    sound = target.get("domain", "devices", "sound")
    if isinstance(sound, dict):
        origin = _origin("devices", "preferredSoundModel")
        model = prefs.get("preferredSoundModel")
        _fill(target, sound, "model", model, at="domain.devices.sound", origin=origin)
    _disks(target, prefs)
    _interfaces(target, prefs)
    _inputs(target, prefs)
    _panic_devices(target, prefs)


def _disks(target: Target, prefs: Mapping[str, Any]) -> None:
    for i, disk in enumerate(target.get("domain", "devices", "disks") or ()):
        if not isinstance(disk, dict):
            continue
        at = f"domain.devices.disks[{i}]"
        if all(disk.get(k) is None for k in ("disk", "cdrom", "lun")):
            disk["disk"] = {}
        for kind, pref_key in (("cdrom", "preferredCdromBus"), ("lun", "preferredLunBus")):
            device = disk.get(kind)
            if disk.get("disk") is None and isinstance(device, dict):
                origin = _origin("devices", pref_key)
                _fill(target, device, "bus", prefs.get(pref_key), at=f"{at}.{kind}", origin=origin)
        device = disk.get("disk")
        if not isinstance(device, dict):
            continue
        bus = prefs.get("preferredDiskBus")
        _fill(
            target,
            device,
            "bus",
            bus,
            at=f"{at}.disk",
            origin=_origin("devices", "preferredDiskBus"),
        )
        for pref_key, key in (
            ("preferredDiskBlockSize", "blockSize"),
            ("preferredDiskCache", "cache"),
            ("preferredDiskIO", "io"),
        ):
            _fill(
                target, disk, key, prefs.get(pref_key), at=at, origin=_origin("devices", pref_key)
            )
        if device.get("bus") == "virtio":
            pref_key = "preferredDiskDedicatedIoThread"
            origin = _origin("devices", pref_key)
            _fill(target, disk, "dedicatedIOThread", prefs.get(pref_key), at=at, origin=origin)


def _pod_networks(target: Target) -> set[Any]:
    networks = target.get("networks") or ()
    return {n.get("name") for n in networks if isinstance(n, dict) and n.get("pod") is not None}


def _interfaces(target: Target, prefs: Mapping[str, Any]) -> None:
    pod = _pod_networks(target)
    masquerade = prefs.get("preferredInterfaceMasquerade")
    for i, iface in enumerate(target.get("domain", "devices", "interfaces") or ()):
        if not isinstance(iface, dict):
            continue
        at = f"domain.devices.interfaces[{i}]"
        origin = _origin("devices", "preferredInterfaceModel")
        _fill(target, iface, "model", prefs.get("preferredInterfaceModel"), at=at, origin=origin)
        unbound = all(iface.get(k) is None for k in BINDINGS)
        if masquerade is not None and unbound and iface.get("name") in pod:
            origin = _origin("devices", "preferredInterfaceMasquerade")
            _fill(target, iface, "masquerade", masquerade, at=at, origin=origin)


def _inputs(target: Target, prefs: Mapping[str, Any]) -> None:
    for i, item in enumerate(target.get("domain", "devices", "inputs") or ()):
        if not isinstance(item, dict):
            continue
        at = f"domain.devices.inputs[{i}]"
        for pref_key, key in (("preferredInputBus", "bus"), ("preferredInputType", "type")):
            _fill(
                target, item, key, prefs.get(pref_key), at=at, origin=_origin("devices", pref_key)
            )


def _panic_devices(target: Target, prefs: Mapping[str, Any]) -> None:
    model = prefs.get("preferredPanicDeviceModel")
    if not model:
        return
    origin = _origin("devices", "preferredPanicDeviceModel")
    devices = target.get("domain", "devices", "panicDevices")
    if not devices:
        target.put(("domain", "devices", "panicDevices"), [{"model": model}], origin)
        return
    for i, device in enumerate(devices):
        if isinstance(device, dict):
            _fill(
                target,
                device,
                "model",
                model,
                at=f"domain.devices.panicDevices[{i}]",
                origin=origin,
            )


def _features(target: Target, prefs: Mapping[str, Any]) -> None:
    if prefs.get("preferredAcpi") is not None:
        origin = _origin("features", "preferredAcpi")
        target.put(("domain", "features", "acpi"), prefs["preferredAcpi"], origin)
    for pref_key, key in FEATURE_DEFAULTS:
        if prefs.get(pref_key) is not None and target.get("domain", "features", key) is None:
            origin = _origin("features", pref_key)
            target.put(("domain", "features", key), prefs[pref_key], origin)
    hyperv = prefs.get("preferredHyperv")
    passthrough = target.get("domain", "features", "hypervPassthrough", "enabled") is True
    if isinstance(hyperv, dict) and not passthrough:
        if target.get("domain", "features", "hyperv") is None:
            origin = _origin("features", "preferredHyperv")
            target.put(("domain", "features", "hyperv"), hyperv, origin)
            return
        for key, value in hyperv.items():
            if target.get("domain", "features", "hyperv", key) is None:
                origin = _origin("features", "preferredHyperv", key)
                target.put(("domain", "features", "hyperv", key), value, origin)


def _firmware(target: Target, prefs: Mapping[str, Any]) -> None:
    loader = ("domain", "firmware", "bootloader")
    chosen = target.get(*loader, "bios") is not None or target.get(*loader, "efi") is not None
    if prefs.get("preferredUseBios") is True and not chosen:
        target.put((*loader, "bios"), {}, _origin("firmware", "preferredUseBios"))
    serial = prefs.get("preferredUseBiosSerial")
    bios = target.get(*loader, "bios")
    if serial is not None and isinstance(bios, dict) and bios.get("useSerial") is None:
        origin = _origin("firmware", "preferredUseBiosSerial")
        target.put((*loader, "bios", "useSerial"), serial, origin)
    chosen = target.get(*loader, "bios") is not None or target.get(*loader, "efi") is not None
    if prefs.get("preferredEfi") is not None:
        if not chosen:
            target.put((*loader, "efi"), prefs["preferredEfi"], _origin("firmware", "preferredEfi"))
        return
    if prefs.get("preferredUseEfi") is True and not chosen:
        target.put((*loader, "efi"), {}, _origin("firmware", "preferredUseEfi"))
    secure = prefs.get("preferredUseSecureBoot")
    efi = target.get(*loader, "efi")
    if secure is not None and isinstance(efi, dict) and efi.get("secureBoot") is None:
        origin = _origin("firmware", "preferredUseSecureBoot")
        target.put((*loader, "efi", "secureBoot"), secure, origin)


def _clock(target: Target, prefs: Mapping[str, Any]) -> None:
    offset = prefs.get("preferredClockOffset")
    clock = target.get("domain", "clock") or {}
    if isinstance(offset, dict) and clock.get("utc") is None and clock.get("timezone") is None:
        for key, value in offset.items():
            origin = _origin("clock", "preferredClockOffset")
            target.put(("domain", "clock", key), value, origin)
    timer = prefs.get("preferredTimer")
    if timer is not None and target.get("domain", "clock", "timer") is None:
        target.put(("domain", "clock", "timer"), timer, _origin("clock", "preferredTimer"))


def _cpu_features(target: Target, features: list[Any]) -> None:
    present = target.get("domain", "cpu", "features") or []
    names = {f.get("name") for f in present if isinstance(f, dict)}
    added = [f for f in features if isinstance(f, dict) and f.get("name") not in names]
    if added:
        origin = _origin("cpu", "preferredCPUFeatures")
        target.put(("domain", "cpu", "features"), [*present, *added], origin)


# (preference spec key, VMI spec key), set when the VMI's is unset.
SPEC_DEFAULTS = (
    ("preferredSubdomain", "subdomain"),
    ("preferredTerminationGracePeriodSeconds", "terminationGracePeriodSeconds"),
    ("preferredArchitecture", "architecture"),
)


def apply_preference(target: Target, spec: PreferenceSpec) -> None:
    """Apply the preference's defaults to `target`."""
    raw = spec.to_dict()
    _cpu_features(target, list(dig(raw, ("cpu", "preferredCPUFeatures")) or ()))
    _devices(target, raw.get("devices") or {})
    _features(target, raw.get("features") or {})
    _firmware(target, raw.get("firmware") or {})
    machine = dig(raw, ("machine", "preferredMachineType"))
    if machine and not target.get("domain", "machine", "type"):
        origin = _origin("machine", "preferredMachineType")
        target.put(("domain", "machine", "type"), machine, origin)
    _clock(target, raw.get("clock") or {})
    for pref_key, key in SPEC_DEFAULTS:
        if raw.get(pref_key) not in (None, "") and target.get(key) in (None, ""):
            target.put((key,), raw[pref_key], _origin(pref_key))
    for key, value in sorted(dict(raw.get("annotations") or {}).items()):
        target.annotate(key, value, owned=False)
