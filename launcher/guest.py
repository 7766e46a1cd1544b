"""Guest-agent queries, reshaped into KubeVirt's guestosinfo / userlist / fslist replies,
and guest-exec for exec probes."""

from __future__ import annotations

import asyncio
from typing import Any

from launcher.manager import DomainManager
from shared.wire.errors import CommandFailed
from shared.wire.launcher_api import GuestExecArgs

EXEC_POLL_SECONDS = 0.1

_OS_KEYS = {
    "name": "name",
    "id": "id",
    "version": "version",
    "version-id": "versionId",
    "pretty-name": "prettyName",
    "kernel-release": "kernelRelease",
    "kernel-version": "kernelVersion",
    "machine": "machine",
}


async def guest_info(manager: DomainManager) -> dict[str, Any]:
    """guest-info + host name + OS info + timezone, as VirtualMachineInstanceGuestAgentInfo."""
    info = await manager.agent("guest-info") or {}
    host = await manager.agent("guest-get-host-name") or {}
    os_info = await manager.agent("guest-get-osinfo") or {}
    try:
        zone = await manager.agent("guest-get-timezone") or {}
    except CommandFailed:  # older agents lack it; the reply is still useful without
        zone = {}
    return {
        "guestAgentVersion": info.get("version", ""),
        "hostname": host.get("host-name", ""),
        "os": {ours: os_info[theirs] for theirs, ours in _OS_KEYS.items() if theirs in os_info},
        "timezone": f"{zone.get('zone', '')}, {zone.get('offset', 0)}" if zone else "",
    }


async def users(manager: DomainManager) -> dict[str, Any]:
    raw = await manager.agent("guest-get-users") or []
    return {
        "items": [
            {
                "userName": u.get("user", ""),
                "domain": u.get("domain", ""),
                "loginTime": u.get("login-time", 0),
            }
            for u in raw
        ]
    }


async def filesystems(manager: DomainManager) -> dict[str, Any]:
    raw = await manager.agent("guest-get-fsinfo") or []
    return {
        "items": [
            {
                "diskName": fs.get("name", ""),
                "mountPoint": fs.get("mountpoint", ""),
                "fileSystemType": fs.get("type", ""),
                "totalBytes": fs.get("total-bytes", 0),
                "usedBytes": fs.get("used-bytes", 0),
            }
            for fs in raw
        ]
    }


async def interfaces(manager: DomainManager) -> dict[str, Any]:
    """The guest agent's interfaces: the VMI interface each is (by MAC), the guest's name
    for it and its addresses; no items while no agent is connected."""
    found = await manager.guest_interfaces()
    names = await manager.device_names() if found else None
    return {
        "items": [
            {
                "name": names.macs.get(g.mac, "") if names else "",
                "interfaceName": g.name,
                "mac": g.mac,
                "ipAddresses": list(g.ip_addresses),
            }
            for g in found
        ]
    }


async def guest_exec(manager: DomainManager, args: GuestExecArgs) -> dict[str, int]:
    """guest-exec, then guest-exec-status until the command exits ({"exitCode": N});
    TimeoutError past args.timeout_seconds (the probe fails)."""
    command = list(args.command)
    started = await manager.agent("guest-exec", {"path": command[0], "arg": command[1:],
                                                 "capture-output": True})  # fmt: skip
    pid = started["pid"]
    async with asyncio.timeout(args.timeout_seconds):
        while True:
            status = await manager.agent("guest-exec-status", {"pid": pid})
            if status.get("exited"):
                return {"exitCode": int(status.get("exitcode", -1))}
            await asyncio.sleep(EXEC_POLL_SECONDS)
