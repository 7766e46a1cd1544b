"""Typed launcher commands for the reconcile loop, with wire errors mapped to SyncError.

The protocol's typed errors (shared.wire.errors) become the `SyncReason` a user reads in
the VMI's Synchronized condition; an invalid VMI is fatal (it will never start), the rest
are retried with backoff.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from handler.errors import LauncherUnavailable, SyncError, SyncReason
from handler.launchers import LauncherPort
from shared.model import GuestOSInfo, VMIInterfaceStatus
from shared.wire.domain import DomainStatus
from shared.wire.errors import (
    CallTimeout,
    CommandFailed,
    Disconnected,
    ErrorCode,
    RemoteError,
    WireError,
)
from shared.wire.expand import ExpandDisksArgs, ExpandDisksReply
from shared.wire.launcher_api import (
    AttachVolumeArgs,
    DetachVolumeArgs,
    Method,
    SyncArgs,
    VolumeReply,
)
from shared.wire.memorydump import MemoryDumpArgs, MemoryDumpReply
from shared.wire.stats import DomainStats

_REASONS: Mapping[str, SyncReason] = {
    ErrorCode.INVALID_VMI: SyncReason.INVALID_SPEC,
    ErrorCode.HYPERVISOR_UNSUPPORTED: SyncReason.HYPERVISOR_UNSUPPORTED,
    ErrorCode.IMAGE_NOT_FOUND: SyncReason.IMAGE_NOT_FOUND,
    ErrorCode.DISK: SyncReason.DISK_ERROR,
    ErrorCode.LIBVIRT: SyncReason.LIBVIRT_ERROR,
}


# The VMI will never start as written (here): it fails at once.
FATAL_REASONS = frozenset({SyncReason.INVALID_SPEC, SyncReason.HYPERVISOR_UNSUPPORTED})


def sync_error(method: Method, exc: Exception) -> SyncError:
    """The SyncError a failed launcher call stands for."""
    if isinstance(exc, LauncherUnavailable):
        return SyncError(SyncReason.LAUNCHER_NOT_READY, str(exc), requeue=False)
    if isinstance(exc, CallTimeout):
        return SyncError(SyncReason.LAUNCHER_TIMEOUT, str(exc))
    if isinstance(exc, Disconnected):
        return SyncError(SyncReason.LAUNCHER_UNREACHABLE, f"{method}: {exc}")
    if isinstance(exc, CommandFailed | RemoteError):
        reason = _REASONS.get(exc.code, SyncReason.SYNC_FAILED)
        fatal = reason in FATAL_REASONS
        return SyncError(reason, f"{method}: {exc.message}", fatal=fatal, requeue=not fatal)
    return SyncError(SyncReason.SYNC_FAILED, f"{method}: {exc}")


async def _call(launcher: LauncherPort, method: Method, args: Mapping[str, Any] | None) -> Any:
    try:
        return await launcher.call(method, args)
    except (WireError, LauncherUnavailable) as exc:
        raise sync_error(method, exc) from exc


async def sync(launcher: LauncherPort, vmi: Mapping[str, Any]) -> DomainStatus:
    """Define and start the domain (idempotent); the domain's status."""
    reply = await _call(launcher, Method.SYNC, SyncArgs(vmi=vmi).to_wire())
    return DomainStatus.from_wire(reply)


async def domain(launcher: LauncherPort, method: Method = Method.GET_DOMAIN) -> DomainStatus:
    """get_domain, shutdown, kill, pause or unpause: each answers the domain's status."""
    return DomainStatus.from_wire(await _call(launcher, method, None))


async def delete(launcher: LauncherPort) -> None:
    """Destroy + undefine; the launcher exits and its pod completes."""
    await _call(launcher, Method.DELETE, None)


async def stats(launcher: LauncherPort) -> DomainStats:
    return DomainStats.from_wire(await _call(launcher, Method.GET_DOMAIN_STATS, None))


async def guest_os_info(launcher: LauncherPort) -> GuestOSInfo:
    """The agent's OS info as status.guestOSInfo."""
    reply = await _call(launcher, Method.GET_GUEST_INFO, None)
    os_info = reply.get("os", {}) if isinstance(reply, Mapping) else {}
    return GuestOSInfo.from_dict(dict(os_info))


async def attach_volume(launcher: LauncherPort, args: AttachVolumeArgs) -> VolumeReply:
    """A hotplugged volume's disk attached to the guest (idempotent)."""
    return VolumeReply.from_wire(await _call(launcher, Method.ATTACH_VOLUME, args.to_wire()))


async def detach_volume(launcher: LauncherPort, volume: str) -> VolumeReply:
    """Ask the guest to release a hotplugged disk; whether the domain still holds it."""
    args = DetachVolumeArgs(volume=volume).to_wire()
    return VolumeReply.from_wire(await _call(launcher, Method.DETACH_VOLUME, args))


async def memory_dump(launcher: LauncherPort, args: MemoryDumpArgs) -> MemoryDumpReply:
    """Start (or follow) a memory dump into the volume's file; its state."""
    reply = await _call(launcher, Method.MEMORY_DUMP, args.to_wire())
    return MemoryDumpReply.from_wire(reply)


async def expand_disks(launcher: LauncherPort, capacities: Mapping[str, int]) -> ExpandDisksReply:
    """Claim disks grown to these capacities (bytes, by volume) under the running guest."""
    args = ExpandDisksArgs(capacities=capacities).to_wire()
    return ExpandDisksReply.from_wire(await _call(launcher, Method.EXPAND_DISKS, args))


async def guest_interfaces(launcher: LauncherPort) -> tuple[VMIInterfaceStatus, ...]:
    """The guest agent's interfaces (name = the VMI interface, when the MAC matched one)."""
    reply = await _call(launcher, Method.GET_INTERFACES, None)
    items = reply.get("items", []) if isinstance(reply, Mapping) else []
    out = []
    for item in items if isinstance(items, list) else []:
        ips = tuple(str(ip) for ip in item.get("ipAddresses") or [])
        out.append(
            VMIInterfaceStatus(
                name=str(item.get("name") or "") or None,
                interface_name=str(item.get("interfaceName") or "") or None,
                mac=str(item.get("mac") or "") or None,
                ip_address=ips[0] if ips else None,
                ip_addresses=ips,
                info_source="guest-agent",
            )
        )
    return tuple(out)


def is_domain_not_found(exc: BaseException) -> bool:
    """True for the launcher's "no domain defined (yet)" answer."""
    cause = exc.__cause__
    return isinstance(cause, RemoteError) and cause.code == ErrorCode.DOMAIN_NOT_FOUND
