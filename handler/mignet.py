"""The migration network as this handler sees it: the address of its `migration0`
interface (the multus network the controller gave the handler pods, shared/mignet.py),
where the migration proxy listens and from which it dials, instead of the pod IP.

No interface (no `migrations.network`, or a node whose multus did not attach it): None,
and the proxy keeps the pod network.
"""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct

import structlog

from shared.mignet import INTERFACE

log = structlog.get_logger("handler.mignet")

SIOCGIFADDR = 0x8915
SIOCGIFNETMASK = 0x891B


def interface_address(name: str = INTERFACE) -> ipaddress.IPv4Interface | None:
    """`name`'s IPv4 address and prefix in this network namespace; None without one."""
    request = struct.pack("256s", name.encode()[:15])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            addr = fcntl.ioctl(s.fileno(), SIOCGIFADDR, request)[20:24]
            mask = fcntl.ioctl(s.fileno(), SIOCGIFNETMASK, request)[20:24]
        except OSError:  # no such interface, or no IPv4 address on it
            return None
    found = ipaddress.IPv4Interface(f"{socket.inet_ntoa(addr)}/{socket.inet_ntoa(mask)}")
    log.info("migration_network_found", interface=name, address=str(found))
    return found
