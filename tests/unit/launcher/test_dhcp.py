"""The launcher's DHCP responder: OFFER for DISCOVER, ACK for REQUEST, the wiring's lease."""

from __future__ import annotations

import ipaddress

from launcher.dhcp import Lease, _options, lease_of, parse_resolv, reply
from shared.podnet import Binding, Route, WiredInterface

GUEST_MAC = bytes.fromhex("020000000001")


def _request(kind: int, mac: bytes = GUEST_MAC, xid: bytes = b"\x01\x02\x03\x04") -> bytes:
    head = bytearray(240)
    head[0], head[1], head[2] = 1, 1, 6
    head[4:8] = xid
    head[28:34] = mac
    head[236:240] = b"\x63\x82\x53\x63"
    return bytes(head) + bytes((53, 1, kind, 255))


def _lease(**kw: object) -> Lease:
    values: dict[str, object] = {
        "ip": "10.0.2.2", "prefix": 24, "server": "10.0.2.1", "gateway": "10.0.2.1",
        "mac": None, "mtu": 1450, "dns": ("198.18.0.10",), "search": ("ns.svc.cluster.local",),
    }  # fmt: skip
    values.update(kw)
    return Lease(**values)  # type: ignore[arg-type]


def test_discover_gets_an_offer_and_request_an_ack_of_the_lease() -> None:
    """DISCOVER → OFFER and REQUEST → ACK, same xid and client MAC, yiaddr the guest's
    address, with mask, router, DNS, search, MTU, an infinite lease and the server id."""
    for kind, answer in ((1, 2), (3, 5)):
        out = reply(_request(kind), _lease())
        assert out is not None
        assert out[0] == 2 and out[4:8] == b"\x01\x02\x03\x04" and out[28:34] == GUEST_MAC
        assert ipaddress.IPv4Address(out[16:20]) == ipaddress.IPv4Address("10.0.2.2")
        opts = _options(out[240:])
        assert opts[53] == bytes((answer,))
        assert opts[54] == ipaddress.IPv4Address("10.0.2.1").packed
        assert opts[1] == ipaddress.IPv4Address("255.255.255.0").packed
        assert opts[3] == ipaddress.IPv4Address("10.0.2.1").packed
        assert opts[6] == ipaddress.IPv4Address("198.18.0.10").packed
        assert opts[15] == b"ns.svc.cluster.local"
        assert opts[119] == b"\x02ns\x03svc\x07cluster\x05local\x00"
        assert opts[26] == (1450).to_bytes(2, "big") and opts[51] == b"\xff\xff\xff\xff"


def test_not_ours_is_not_answered() -> None:
    """Other message types, non-DHCP packets and (bridge binding) other MACs get nothing."""
    assert reply(_request(7), _lease()) is None  # RELEASE
    assert reply(b"\x01" * 100, _lease()) is None
    assert reply(_request(1, mac=bytes(6)), _lease(mac="02:00:00:00:00:01")) is None
    assert reply(_request(1), _lease(mac="02:00:00:00:00:01")) is not None


def test_classless_routes_carry_the_default_too() -> None:
    """Extra routes go as option 121 with the default route added (RFC 3442 clients ignore
    the router option when 121 is present)."""
    out = reply(_request(1), _lease(routes=(("198.19.0.0/16", "10.0.2.1"),)))
    assert out is not None
    assert _options(out[240:])[121] == bytes((16, 198, 19, 10, 0, 2, 1, 0, 10, 0, 2, 1))


def test_lease_of_a_bridge_binding_answers_only_its_mac() -> None:
    """A bridge binding's lease is the pod's address for the pod's MAC; a masquerade one
    answers any client (only the guest is on its bridge); DNS comes from resolv.conf."""
    wired = WiredInterface(
        name="default", binding=Binding.BRIDGE, tap="tap0", bridge="k6t-eth0",
        guest_ip="198.18.1.5", prefix=24, server_ip="169.254.75.10", gateway="198.18.1.1",
        mac="0a:58:c6:12:01:05", mtu=1500,
        routes=(Route(destination="198.19.0.0/16", gateway="198.18.1.1"),),
    )  # fmt: skip
    resolv = "search a.svc b.svc\nnameserver 198.18.0.10\nnameserver fd00::10\noptions ndots:5\n"
    lease = lease_of(wired, resolv=resolv, hostname="vm")
    assert lease.mac == "0a:58:c6:12:01:05" and lease.ip == "198.18.1.5"
    assert lease.dns == ("198.18.0.10",) and lease.search == ("a.svc", "b.svc")
    assert lease.routes == (("198.19.0.0/16", "198.18.1.1"),)
    masq = lease_of(
        WiredInterface(name="default", binding=Binding.MASQUERADE, tap="tap0", bridge="k6t-eth0",
                       guest_ip="10.0.2.2", prefix=24, server_ip="10.0.2.1", gateway="10.0.2.1"),
        resolv="", hostname="vm",
    )  # fmt: skip
    assert masq.mac is None
    assert parse_resolv("") == ((), ())
