"""The guest's DHCP server, as KubeVirt's virt-launcher serves it: a tiny responder per
wired interface, bound to that interface's in-pod bridge (shared/podnet.py).

Why not dnsmasq: the guest is the only client on the bridge and gets the one address the
wiring decided, so a responder of ~150 lines answers DISCOVER with an OFFER and REQUEST
with an ACK of that address (infinite lease, as KubeVirt) and needs no package, no
config file, no lease database and no process to supervise; it runs in the launcher's
event loop without privileges (port 67 is the container's NET_BIND_SERVICE). Replies are
broadcast on the bridge, which every client accepts (busybox udhcpc listens on a packet
socket until bound). A bridge binding answers only the guest's MAC: the pod interface is
on the same bridge.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import structlog

from shared.model.devopts import DHCPOptions
from shared.podnet import WiredInterface

log = structlog.get_logger("launcher.dhcp")

SERVER_PORT, CLIENT_PORT = 67, 68
MAGIC = b"\x63\x82\x53\x63"
DISCOVER, OFFER, REQUEST, ACK = 1, 2, 3, 5
INFINITE = 0xFFFFFFFF


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """What the guest is told."""

    ip: str
    prefix: int
    server: str
    gateway: str | None
    mac: str | None  # answer only this client (None: any)
    mtu: int
    dns: tuple[str, ...] = ()
    search: tuple[str, ...] = ()
    hostname: str = ""
    routes: tuple[tuple[str, str], ...] = ()  # (CIDR, gateway)


@dataclass(frozen=True, slots=True, kw_only=True)
class Extras:
    """An interface's dhcpOptions, as KubeVirt serves them: boot file (67), TFTP server
    (66), NTP servers (42) and site-specific options 224-254 with their text."""

    boot_file: str | None = None
    tftp_server: str | None = None
    ntp: tuple[str, ...] = ()
    private: tuple[tuple[int, str], ...] = ()


ExtrasOf = Callable[[str], Extras]  # interface name → its extras (read at each reply)


def extras_of(options: DHCPOptions | None) -> Extras:
    """The extras of an interface's dhcpOptions (none: empty)."""
    if options is None:
        return Extras()
    private = tuple((p.option or 0, p.value or "") for p in options.private_options)
    return Extras(
        boot_file=options.boot_file_name or None, tftp_server=options.tftp_server_name or None,
        ntp=options.ntp_servers, private=private,
    )  # fmt: skip


def _extra_options(extras: Extras) -> bytes:
    out = b""
    if extras.tftp_server:
        out += _opt(66, extras.tftp_server.encode()[:255])
    if extras.boot_file:
        out += _opt(67, extras.boot_file.encode()[:255])
    if extras.ntp:
        out += _opt(42, b"".join(_ip(n) for n in extras.ntp[:63]))
    for code, text in extras.private:
        out += _opt(code, text.encode()[:255])
    return out


def lease_of(wired: WiredInterface, *, resolv: str, hostname: str) -> Lease:
    """The lease of a wired interface, DNS taken from the pod's resolv.conf."""
    dns, search = parse_resolv(resolv)
    return Lease(
        ip=wired.guest_ip, prefix=wired.prefix, server=wired.server_ip, gateway=wired.gateway,
        mac=wired.mac if wired.binding == "bridge" else None, mtu=wired.mtu, dns=dns,
        search=search, hostname=hostname,
        routes=tuple((r.destination, r.gateway) for r in wired.routes),
    )  # fmt: skip


def parse_resolv(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """IPv4 nameservers and search domains of a resolv.conf."""
    dns: list[str] = []
    search: list[str] = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver" and "." in words[1]:
            dns.append(words[1])
        elif words and words[0] == "search":
            search = words[1:]
    return tuple(dns), tuple(search)


def _options(data: bytes) -> dict[int, bytes]:
    out, i = {}, 0
    while i < len(data):
        code = data[i]
        if code == 255:
            break
        if code == 0:
            i += 1
            continue
        if i + 1 >= len(data):
            break
        size = data[i + 1]
        out[code] = data[i + 2 : i + 2 + size]
        i += 2 + size
    return out


def _opt(code: int, value: bytes) -> bytes:
    return bytes((code, len(value))) + value


def _ip(text: str) -> bytes:
    return ipaddress.IPv4Address(text).packed


def _domain_search(domains: Sequence[str]) -> bytes:
    """RFC 3397's encoding, uncompressed."""
    out = b""
    for domain in domains:
        for label in domain.strip(".").split("."):
            out += bytes((len(label),)) + label.encode()
        out += b"\x00"
    return out[:255]


def _classless(routes: Sequence[tuple[str, str]], gateway: str | None) -> bytes:
    """RFC 3442 routes (its clients ignore the router option, so the default is added)."""
    out = b""
    for cidr, via in (*routes, *((("0.0.0.0/0", gateway),) if gateway else ())):
        net = ipaddress.IPv4Network(cidr)
        significant = (net.prefixlen + 7) // 8
        out += bytes((net.prefixlen,)) + net.network_address.packed[:significant] + _ip(via)
    return out


def _lease_options(kind: int, lease: Lease, extras: Extras) -> bytes:
    mask = ipaddress.IPv4Network(f"0.0.0.0/{lease.prefix}").netmask.packed
    out = _opt(53, bytes((kind,))) + _opt(54, _ip(lease.server))
    out += _opt(51, INFINITE.to_bytes(4, "big")) + _opt(1, mask)
    if lease.gateway:
        out += _opt(3, _ip(lease.gateway))
    if lease.routes:
        out += _opt(121, _classless(lease.routes, lease.gateway))
    if lease.dns:
        out += _opt(6, b"".join(_ip(d) for d in lease.dns[:3]))
    if lease.search:
        out += _opt(15, lease.search[0].encode()[:255])
        out += _opt(119, _domain_search(lease.search))
    if lease.hostname:
        out += _opt(12, lease.hostname.encode()[:63])
    out += _extra_options(extras)
    return out + _opt(26, lease.mtu.to_bytes(2, "big")) + b"\xff"


def reply(request: bytes, lease: Lease, extras: Extras | None = None) -> bytes | None:
    """The OFFER or ACK for `request`, or None when it is not ours to answer."""
    if len(request) < 240 or request[0] != 1 or request[236:240] != MAGIC:
        return None
    kind = _options(request[240:]).get(53, b"\x00")[0]
    answer = {DISCOVER: OFFER, REQUEST: ACK}.get(kind)
    if answer is None:
        return None
    if lease.mac is not None and request[28:34] != bytes.fromhex(lease.mac.replace(":", "")):
        return None
    head = bytearray(request[:240])
    head[0], head[3] = 2, 0  # BOOTREPLY, hops
    head[16:20], head[20:24] = _ip(lease.ip), _ip(lease.server)  # yiaddr, siaddr
    head[44:236] = bytes(192)  # sname, file
    return bytes(head) + _lease_options(answer, lease, extras or Extras())


class _Responder(asyncio.DatagramProtocol):
    def __init__(self, lease: Lease, device: str, extras: Callable[[], Extras]) -> None:
        self._lease, self._device, self._extras = lease, device, extras
        self._transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.DatagramTransport, transport)  # a datagram endpoint's

    def datagram_received(self, data: bytes, addr: tuple[str | int, int]) -> None:
        out = reply(data, self._lease, self._extras())
        if out is not None and self._transport is not None:
            self._transport.sendto(out, ("255.255.255.255", CLIENT_PORT))
            log.info("dhcp_answered", device=self._device, ip=self._lease.ip, kind=out[242])


def _socket(device: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, device.encode())
    s.bind(("0.0.0.0", SERVER_PORT))
    s.setblocking(False)
    return s


async def serve(lease: Lease, device: str, *, extras: Callable[[], Extras] = Extras) -> None:
    """Answer the guest on `device` until cancelled (`extras` read at each reply: the VMI
    reaches the launcher after its network is wired)."""
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: _Responder(lease, device, extras), sock=_socket(device)
    )
    log.info("dhcp_serving", device=device, ip=lease.ip, prefix=lease.prefix)
    try:
        await asyncio.Event().wait()
    finally:
        transport.close()
