"""The launcher's DHCPv6 server: the wiring's IPv6 address to the guest, as KubeVirt's."""

from __future__ import annotations

import ipaddress
import struct

import pytest

from launcher.dhcp6 import (
    ADVERTISE,
    REPLY,
    Lease6,
    ipv6_dns,
    options,
    reply,
    server_duid,
)

CLIENT_DUID = bytes.fromhex("00030001020000000001")
LEASE = Lease6(ip="fd10:0:2::2", dns=("fd0d:4a03:aeea:f::a",))


def _opt(code: int, value: bytes) -> bytes:
    return struct.pack("!HH", code, len(value)) + value


def _message(kind: int, *opts: bytes) -> bytes:
    return bytes([kind]) + b"\xab\xcd\xef" + b"".join(opts)


def _address(answer: bytes) -> str:
    ia = options(answer[4:])[3]
    assert ia[:4] == b"\x00\x00\x00\x07"  # the client's IAID back
    iaaddr = options(ia[12:])[5]
    assert iaaddr[16:] == b"\xff" * 8  # infinite lifetimes
    return str(ipaddress.IPv6Address(iaaddr[:16]))


IA = _opt(3, b"\x00\x00\x00\x07" + bytes(8))


def test_a_rapid_commit_solicit_gets_a_reply_with_the_address() -> None:
    """SOLICIT with rapid commit: REPLY (same transaction) with the client's and the
    server's ids, the wiring's address in the IA_NA, the pod's IPv6 name servers."""
    answer = reply(_message(1, _opt(1, CLIENT_DUID), IA, _opt(14, b"")), LEASE)
    assert answer is not None and answer[0] == REPLY and answer[1:4] == b"\xab\xcd\xef"
    opts = options(answer[4:])
    assert opts[1] == CLIENT_DUID and opts[2] == server_duid() and 14 in opts
    assert _address(answer) == "fd10:0:2::2"
    assert opts[23] == ipaddress.IPv6Address("fd0d:4a03:aeea:f::a").packed


def test_the_four_message_exchange() -> None:
    """SOLICIT without rapid commit: ADVERTISE; then REQUEST to this server: REPLY."""
    advertise = reply(_message(1, _opt(1, CLIENT_DUID), IA), LEASE)
    assert advertise is not None and advertise[0] == ADVERTISE and 14 not in options(advertise[4:])
    request = _message(3, _opt(1, CLIENT_DUID), _opt(2, server_duid()), IA)
    answer = reply(request, LEASE)
    assert answer is not None and answer[0] == REPLY
    assert _address(answer) == "fd10:0:2::2"


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(_message(11, _opt(1, CLIENT_DUID)), id="information-request"),
        pytest.param(_message(8, _opt(1, CLIENT_DUID)), id="release"),
        pytest.param(_message(1, IA), id="no-client-id"),
        pytest.param(_message(3, _opt(1, CLIENT_DUID), _opt(2, b"other")), id="other-server"),
        pytest.param(b"\x01\x00", id="truncated"),
    ],
)
def test_what_gets_no_answer(message: bytes) -> None:
    """Messages the server does not answer: information requests, releases, a client
    without an id, a REQUEST meant for another server, a truncated message."""
    assert reply(message, LEASE) is None


def test_ipv6_name_servers_only() -> None:
    """The pod's resolv.conf's IPv6 name servers go by DHCPv6 (IPv4 ones by DHCPv4)."""
    text = "search a.svc\nnameserver 198.18.15.10\nnameserver fd00::a\n"
    assert ipv6_dns(text) == ("fd00::a",)
