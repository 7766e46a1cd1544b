"""The guest's emulated devices beside disks and interfaces (domain.devices.inputs, watchdog,
panicDevices, video, sound), its clock (domain.clock) and its SMBIOS chassis
(domain.chassis), as KubeVirt's kubevirt.io/v1 has them. Values stay plain strings:
validation (shared/model/_validate_devices.py) names a bad one with its field path and the
values KubeVirt allows.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.model._codec import Model


@dataclass(frozen=True, slots=True, kw_only=True)
class Chassis(Model):
    """domain.chassis: SMBIOS type 3 (chassis) strings the guest reads (dmidecode -t 3)."""

    manufacturer: str | None = None
    version: str | None = None
    serial: str | None = None
    asset: str | None = None
    sku: str | None = None

    def entries(self) -> tuple[tuple[str, str], ...]:
        """The set ones as (libvirt's entry name, value), in libvirt's order."""
        pairs = (
            ("manufacturer", self.manufacturer), ("version", self.version),
            ("serial", self.serial), ("asset", self.asset), ("sku", self.sku),
        )  # fmt: skip
        return tuple((name, value) for name, value in pairs if value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Input(Model):
    """devices.inputs[]: a tablet or keyboard on the usb (default) or virtio bus."""

    name: str | None = None
    type: str | None = None
    bus: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class I6300ESBWatchdog(Model):
    """watchdog.i6300esb: the action when it expires (poweroff, reset, shutdown; default
    reset)."""

    action: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Watchdog(Model):
    """devices.watchdog: a named i6300esb watchdog (diag288 is s390x's: refused)."""

    name: str | None = None
    i6300esb: I6300ESBWatchdog | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PanicDevice(Model):
    """devices.panicDevices[]: a pvpanic device (isa, the x86 default, or pvpanic on PCI)."""

    model: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VideoDevice(Model):
    """devices.video: the graphics card's type (vga, bochs, virtio, ramfb, cirrus)."""

    type: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SoundDevice(Model):
    """devices.sound: an emulated sound card, ich9 (default) or ac97."""

    name: str | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClockOffsetUTC(Model):
    """clock.utc: the guest clock in UTC, offsetSeconds ahead (negative: behind)."""

    offset_seconds: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HPETTimer(Model):
    """timer.hpet; `present` false removes the timer."""

    tick_policy: str | None = None
    present: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PITTimer(Model):
    """timer.pit."""

    tick_policy: str | None = None
    present: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RTCTimer(Model):
    """timer.rtc: tick policy and what it tracks (guest or wall)."""

    tick_policy: str | None = None
    present: bool | None = None
    track: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class KVMTimer(Model):
    """timer.kvm: kvmclock (KVM only)."""

    present: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HypervTimer(Model):
    """timer.hyperv: the Hyper-V reference clock (KVM only)."""

    present: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Timer(Model):
    """clock.timer."""

    hpet: HPETTimer | None = None
    kvm: KVMTimer | None = None
    pit: PITTimer | None = None
    rtc: RTCTimer | None = None
    hyperv: HypervTimer | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Clock(Model):
    """domain.clock: one of utc and timezone, and the timers."""

    utc: ClockOffsetUTC | None = None
    timezone: str | None = None
    timer: Timer | None = None
