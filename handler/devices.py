"""Host devices the guests need: checked up front, with an error that says what to fix.

QEMU opens /dev/kvm (hardware acceleration), /dev/net/tun (tap devices for bridge
binding) and /dev/vhost-net (in-kernel virtio-net). A device that is missing or not
readable and writable would otherwise surface later as an obscure QEMU start failure.
Missing optional devices only degrade (no KVM → TCG); a problem with a required one
keeps the node unschedulable. The same check decides the health that the device plugins
(handler.deviceplugin) report to the kubelet.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import structlog

log = structlog.get_logger("handler.devices")

Access = Callable[[Path], bool]

_EFFECTS = {
    "kvm": "guests run under TCG (software emulation), much slower",
    "tun": "bridge-bound interfaces (tap devices) cannot be created",
    "vhost-net": "virtio-net runs in QEMU's userspace (slower networking)",
    "vhost-vsock": (
        "VMIs with autoattachVSOCK cannot be scheduled here (load the vhost_vsock module)"
    ),
}


class DeviceState(StrEnum):
    OK = "Ok"
    MISSING = "Missing"
    NOT_A_DEVICE = "NotACharacterDevice"
    NO_ACCESS = "NoAccess"


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceCheck:
    path: Path
    state: DeviceState
    required: bool
    message: str

    @property
    def ok(self) -> bool:
        return self.state is DeviceState.OK


def _rw(path: Path) -> bool:
    return os.access(path, os.R_OK | os.W_OK)


def check_device(path: Path, *, required: bool, access: Access = _rw) -> DeviceCheck:
    """One device's state, with a message naming the consequence and the fix."""
    effect = _EFFECTS.get(path.name, "guests that need it cannot start")
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return DeviceCheck(
            path=path,
            state=DeviceState.MISSING,
            required=required,
            message=f"{path} does not exist: {effect}",
        )
    if not stat.S_ISCHR(mode):
        return DeviceCheck(
            path=path,
            state=DeviceState.NOT_A_DEVICE,
            required=required,
            message=f"{path} is not a character device: {effect}",
        )
    if not access(path):
        return DeviceCheck(
            path=path,
            state=DeviceState.NO_ACCESS,
            required=required,
            message=(
                f"{path} is not readable and writable by uid {os.getuid()} "
                f"(mode {stat.filemode(mode)}): {effect}; fix its permissions or the "
                "handler's privileges"
            ),
        )
    return DeviceCheck(path=path, state=DeviceState.OK, required=required, message="ok")


def check_devices(
    paths: Iterable[Path], *, required: Iterable[Path], access: Access = _rw
) -> tuple[DeviceCheck, ...]:
    """Check every device and log each problem once."""
    needed = set(required)
    checks = tuple(
        check_device(p, required=p in needed, access=access) for p in dict.fromkeys(paths)
    )
    for c in checks:
        if not c.ok:
            log_fn = log.error if c.required else log.warning
            log_fn("device_unusable", device=str(c.path), state=str(c.state), detail=c.message)
    return checks


def devices_ready(checks: Iterable[DeviceCheck]) -> bool:
    """True when every required device is usable."""
    return all(c.ok for c in checks if c.required)
