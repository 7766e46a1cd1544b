"""The guest's DHCPv6 server on a dual-stack masquerade interface, as KubeVirt's
virt-launcher serves it: stateful DHCPv6 handing the guest the one address the wiring
decided (``WiredInterface.guest_ip6``: ::2 of ``vmIPv6NetworkCIDR``), with infinite
lifetimes (as the IPv4 lease, launcher/dhcp.py).

It answers SOLICIT with ADVERTISE, or with REPLY when the client asks for a rapid commit,
and REQUEST, RENEW, REBIND and CONFIRM with REPLY; INFORMATION-REQUEST and RELEASE are
not answered. Unprivileged: port 547 is the container's NET_BIND_SERVICE, joining the
all-servers group and binding to the bridge need nothing more. Like KubeVirt, no router
advertisement is sent (that needs a raw ICMPv6 socket, CAP_NET_RAW, which the launcher
does not hold): a guest routes through the server that answered, the in-pod bridge
(docs/network.md).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import struct
from dataclasses import dataclass
from typing import Any, cast

import structlog

from shared import podnet

log = structlog.get_logger("launcher.dhcp6")

SERVER_PORT, CLIENT_PORT = 547, 546
ALL_SERVERS = "ff02::1:2"
SOLICIT, ADVERTISE, REQUEST, CONFIRM, RENEW, REBIND, REPLY = 1, 2, 3, 4, 5, 6, 7
OPT_CLIENTID, OPT_SERVERID, OPT_IA_NA, OPT_IAADDR, OPT_RAPID_COMMIT = 1, 2, 3, 5, 14
OPT_DNS_SERVERS = 23
INFINITE = 0xFFFFFFFF
ANSWERED = {SOLICIT, REQUEST, CONFIRM, RENEW, REBIND}


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease6:
    """What the guest is told: its address and the IPv6 name servers of the pod."""

    ip: str
    dns: tuple[str, ...] = ()


def server_duid(mac: str = podnet.MASQUERADE_GATEWAY_MAC) -> bytes:
    """DUID-LL (type 3, Ethernet) of the bridge's MAC: the same in every pod."""
    return struct.pack("!HH", 3, 1) + bytes.fromhex(mac.replace(":", ""))


def _opt(code: int, value: bytes) -> bytes:
    return struct.pack("!HH", code, len(value)) + value


def options(data: bytes) -> dict[int, bytes]:
    """The options of a message body (the first of each code); a truncated one ends it."""
    out: dict[int, bytes] = {}
    at = 0
    while at + 4 <= len(data):
        code, length = struct.unpack_from("!HH", data, at)
        value = data[at + 4 : at + 4 + length]
        if len(value) < length:
            break
        out.setdefault(code, value)
        at += 4 + length
    return out


def reply(request: bytes, lease: Lease6) -> bytes | None:
    """The answer to one client message, or None when it gets none."""
    if len(request) < 4 or request[0] not in ANSWERED:
        return None
    kind, xid, opts = request[0], request[1:4], options(request[4:])
    client = opts.get(OPT_CLIENTID)
    if client is None:
        return None
    server = opts.get(OPT_SERVERID)
    if kind in (REQUEST, RENEW) and server is not None and server != server_duid():
        return None  # meant for another server
    rapid = kind == SOLICIT and OPT_RAPID_COMMIT in opts
    answer = ADVERTISE if kind == SOLICIT and not rapid else REPLY
    ia = opts.get(OPT_IA_NA, b"\x00\x00\x00\x01")
    iaid = ia[:4].ljust(4, b"\x00")
    addr = ipaddress.IPv6Address(lease.ip).packed
    iaaddr = _opt(OPT_IAADDR, addr + struct.pack("!II", INFINITE, INFINITE))
    body = _opt(OPT_CLIENTID, client) + _opt(OPT_SERVERID, server_duid())
    body += _opt(OPT_IA_NA, iaid + struct.pack("!II", INFINITE, INFINITE) + iaaddr)
    if rapid:
        body += _opt(OPT_RAPID_COMMIT, b"")
    if lease.dns:
        body += _opt(OPT_DNS_SERVERS, b"".join(ipaddress.IPv6Address(d).packed for d in lease.dns))
    return bytes([answer]) + xid + body


def ipv6_dns(resolv: str) -> tuple[str, ...]:
    """The IPv6 name servers of a resolv.conf (the IPv4 ones go by DHCPv4)."""
    found = []
    for line in resolv.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver" and ":" in words[1]:
            found.append(words[1])
    return tuple(found)


class _Server(asyncio.DatagramProtocol):
    def __init__(self, lease: Lease6, device: str) -> None:
        self.lease, self.device = lease, device
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)  # a datagram endpoint's

    def datagram_received(self, data: bytes, addr: tuple[Any, ...]) -> None:
        answer = reply(data, self.lease)
        if answer is None or self.transport is None:
            return
        log.info("dhcp6_answered", device=self.device, kind=answer[0], ip=self.lease.ip)
        self.transport.sendto(answer, (str(addr[0]), CLIENT_PORT, 0, int(addr[3])))


def _socket(device: str) -> socket.socket:
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, device.encode())
    index = socket.if_nametoindex(device)
    group = socket.inet_pton(socket.AF_INET6, ALL_SERVERS) + struct.pack("@I", index)
    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, group)
    s.bind(("::", SERVER_PORT))
    s.setblocking(False)
    return s


async def serve(lease: Lease6, device: str) -> None:
    """Answer DHCPv6 on `device` (the in-pod bridge) until cancelled."""
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: _Server(lease, device), sock=_socket(device)
    )
    log.info("dhcp6_serving", device=device, ip=lease.ip)
    try:
        await asyncio.Event().wait()
    finally:
        transport.close()
