"""The launcher's side of the pod network (shared/podnet.py): once virt-handler's wiring
file appears, serve DHCP to the guest on each wired interface's bridge (and DHCPv6 on a
dual-stack masquerade one)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from pathlib import Path

import structlog

from launcher import dhcp, dhcp6
from shared import podnet
from shared.model import VirtualMachineInstance
from shared.podnet import Binding

log = structlog.get_logger("launcher.podnet")

RESOLV_CONF = Path("/etc/resolv.conf")


def _none(_name: str) -> dhcp.Extras:
    return dhcp.Extras()


def vmi_extras(vmi: Callable[[], VirtualMachineInstance | None]) -> dhcp.ExtrasOf:
    """Each interface's dhcpOptions from the VMI the launcher was given (none before)."""

    def of(name: str) -> dhcp.Extras:
        current = vmi()
        iface = current.spec.domain.devices.interface(name) if current is not None else None
        return dhcp.extras_of(iface.dhcp_options if iface is not None else None)

    return of


def masquerade_wired(path: Path) -> bool:
    """Masquerade runs on the handler's NAT (not QEMU's user network): no port forwards."""
    wiring = podnet.read(path)
    return wiring is not None and any(i.binding is Binding.MASQUERADE for i in wiring.interfaces)


async def serve(
    path: Path, *, hostname: str, extras: dhcp.ExtrasOf | None = None, poll: float = 0.2
) -> None:
    """Wait for the wiring file, then answer DHCP on every wired interface until cancelled
    (with each interface's dhcpOptions, `extras`)."""
    wiring = podnet.read(path)
    while wiring is None:  # written by another process (virt-handler): polled
        await asyncio.sleep(poll)
        wiring = podnet.read(path)
    try:
        resolv = RESOLV_CONF.read_text()
    except OSError:
        resolv = ""
    leased = [w for w in wiring.interfaces if w.guest_ip]  # a layer-2-only one has none
    if not leased:
        return
    try:
        async with asyncio.TaskGroup() as tg:
            for wired in leased:
                lease = dhcp.lease_of(wired, resolv=resolv, hostname=hostname)
                of = functools.partial(extras or _none, wired.name)
                tg.create_task(
                    dhcp.serve(lease, wired.bridge, extras=of), name=f"dhcp-{wired.name}"
                )
                if wired.guest_ip6:  # dual-stack masquerade (launcher/dhcp6.py)
                    lease6 = dhcp6.Lease6(ip=wired.guest_ip6, dns=dhcp6.ipv6_dns(resolv))
                    tg.create_task(dhcp6.serve(lease6, wired.bridge), name=f"dhcp6-{wired.name}")
    except* OSError as group:  # the guest gets no address; said loudly, the VM still runs
        log.error("dhcp_failed", error=str(group.exceptions[0]))
