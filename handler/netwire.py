"""The two bindings' wiring inside a launcher pod's network namespace (shared/podnet.py).

Both make a bridge in front of the pod interface and a tap on it owned by the launcher's
user (QEMU opens it unprivileged). Masquerade gives the bridge the guest range's gateway
and adds nftables NAT; bridge moves the pod interface's address to the guest (the
interface joins the bridge with a new MAC, the guest takes the old one).
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from handler import netns, netwire6
from handler.netns import Launcher, WiringError
from shared import podnet
from shared.podnet import Binding, Route, WiredInterface

log = structlog.get_logger("handler.netwire")


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """The VMI interface on the pod network and how it binds."""

    index: int  # in interfaces[] (the tap's number)
    name: str
    binding: Binding
    tcp_ports: tuple[int, ...] = ()  # masquerade's listed ports; none listed: every port
    udp_ports: tuple[int, ...] = ()
    listed: bool = False  # interfaces[].ports given: only those reach the guest
    mac: str | None = None  # interfaces[].macAddress
    pod_interface: str = podnet.POD_INTERFACE  # eth0, or the multus interface (pod<hash>)
    multi_queue: bool = False  # networkInterfaceMultiqueue: the tap is multi-queue
    # masquerade's guest range (networks[].pod.vmNetworkCIDR; KubeVirt's 10.0.2.0/24)
    guest_range: podnet.GuestRange = field(default_factory=podnet.GuestRange)
    # its IPv6 range on a dual-stack pod (networks[].pod.vmIPv6NetworkCIDR; fd10:0:2::/120)
    guest_range6: podnet.GuestRange = field(default_factory=lambda: podnet.guest_range6(None))


def nat_rules(target: Target, *, pod_if: str = podnet.POD_INTERFACE) -> str:
    """The nftables ruleset of masquerade (replacing an earlier one of the same table)."""
    return nat_ruleset(
        "ip", target.guest_range.guest, tcp_ports=target.tcp_ports,
        udp_ports=target.udp_ports, listed=target.listed, pod_if=pod_if,
    )  # fmt: skip


def nat_ruleset(
    family: str,
    guest: str,
    *,
    tcp_ports: tuple[int, ...],
    udp_ports: tuple[int, ...],
    listed: bool,
    pod_if: str = podnet.POD_INTERFACE,
) -> str:
    """One family's (`ip` or `ip6`) NAT table, replacing an earlier one of the same name:
    every port, or the listed ones, DNATed to the guest; the guest's traffic masqueraded
    behind the pod's address."""
    table = podnet.NFT_TABLE
    inbound = []
    for proto, ports in (("tcp", tcp_ports), ("udp", udp_ports)):
        if not listed:
            inbound.append(f'iifname "{pod_if}" meta l4proto {proto} dnat to {guest}')
        elif ports:
            numbers = ", ".join(str(p) for p in sorted(set(ports)))
            inbound.append(f'iifname "{pod_if}" {proto} dport {{ {numbers} }} dnat to {guest}')
    pre = "\n".join(f"    {rule}" for rule in inbound)
    return (
        f"table {family} {table} {{}}\ndelete table {family} {table}\n"
        f"table {family} {table} {{\n"
        "  chain prerouting {\n    type nat hook prerouting priority dstnat; policy accept;\n"
        f"{pre}\n  }}\n"
        "  chain postrouting {\n    type nat hook postrouting priority srcnat; policy accept;\n"
        f'    {family} saddr {guest} oifname "{pod_if}" masquerade\n  }}\n'
        "}\n"
    )


async def open_guest_port(
    launcher: Launcher, port: int, *, guest: str, pod_if: str = podnet.POD_INTERFACE
) -> None:
    """A port-forward tunnel to a TCP port masquerade's listed `ports` leave out: one more
    DNAT rule for it to the `guest` address (as the user-mode path forwarded a port on
    demand; added once)."""
    table = podnet.NFT_TABLE
    chain = await netns.run(launcher.pid, "nft", "list", "chain", "ip", table, "prerouting")
    if f"tcp dport {port} dnat" in chain:
        return
    rule = f'add rule ip {table} prerouting iifname "{pod_if}" tcp dport {port} dnat to {guest}\n'
    await netns.run(launcher.pid, "nft", "-f", "-", stdin=rule)


async def _links(pid: int, *argv: str) -> dict[str, dict[str, Any]]:
    """The namespace's links by name (`ip -j link show`, or `addr show` with argv)."""
    return {link["ifname"]: link for link in await netns.ip_json(pid, *(argv or ("link", "show")))}


def bridge_and_tap(
    links: dict[str, dict[str, Any]],
    *,
    bridge: str,
    tap: str,
    mtu: int,
    uid: int,
    mac: str | None = None,
    multi_queue: bool = False,
) -> list[list[str]]:
    """The `ip` commands that make the bridge and the launcher user's tap on it (those
    already in `links` are kept)."""
    cmds = [] if bridge in links else [["link", "add", bridge, "type", "bridge"]]
    if mac is not None:
        cmds.append(["link", "set", bridge, "address", mac])
    cmds.append(["link", "set", bridge, "mtu", str(mtu), "up"])
    if tap not in links:
        flags = ["multi_queue"] if multi_queue else []
        tuntap = ["tuntap", "add", "dev", tap, "mode", "tap", "user", str(uid), "vnet_hdr"]
        cmds.append([*tuntap, *flags])
    cmds.append(["link", "set", tap, "mtu", str(mtu), "master", bridge, "up"])
    return cmds


def masquerade_commands(
    links: dict[str, dict[str, Any]], *, uid: int, target: Target
) -> list[list[str]]:
    """The `ip` commands of masquerade: bridge (the guest range's gateway) and tap."""
    pod_if = podnet.POD_INTERFACE
    link = links.get(pod_if)
    if link is None:
        raise WiringError(f"the pod has no interface {pod_if}")
    bridge = podnet.bridge_name(pod_if)
    cmds = bridge_and_tap(
        links, bridge=bridge, tap=podnet.tap_name(target.index), mtu=int(link.get("mtu", 1500)),
        uid=uid, mac=podnet.MASQUERADE_GATEWAY_MAC, multi_queue=target.multi_queue,
    )  # fmt: skip
    rng = target.guest_range
    return [*cmds, ["addr", "replace", f"{rng.gateway}/{rng.prefix}", "dev", bridge]]


@dataclass(frozen=True, slots=True, kw_only=True)
class MasqueradeBatch:
    """Masquerade's namespace changes, planned from the pod's links."""

    ip: list[list[str]]
    sysctls: dict[str, str]
    nft: str
    dual: bool  # the pod has an IPv6 address: the guest gets its IPv6 range too


def masquerade_batch(
    links: dict[str, dict[str, Any]], *, uid: int, target: Target
) -> MasqueradeBatch:
    """The `ip` commands, sysctls and NAT rules of masquerade; on a dual-stack pod the same
    in IPv6 (handler/netwire6.py)."""
    pod_if = podnet.POD_INTERFACE
    cmds = masquerade_commands(links, uid=uid, target=target)
    sysctls, nft = {"net.ipv4.ip_forward": "1"}, nat_rules(target, pod_if=pod_if)
    dual = netwire6.pod_has_ipv6(links[pod_if])
    if dual:
        rng6, bridge = target.guest_range6, podnet.bridge_name(pod_if)
        cmds.append(netwire6.bridge_address(rng6, bridge=bridge))
        sysctls[netwire6.FORWARDING] = "1"
        nft += nat_ruleset(
            "ip6", rng6.guest, tcp_ports=target.tcp_ports, udp_ports=target.udp_ports,
            listed=target.listed, pod_if=pod_if,
        )  # fmt: skip
    return MasqueradeBatch(ip=cmds, sysctls=sysctls, nft=nft, dual=dual)


async def masquerade(launcher: Launcher, target: Target) -> WiredInterface:
    """The guest on its range's address behind NAT to the pod's address: one query, then
    the links, the sysctl and the NAT rules in one batch."""
    pod_if = podnet.POD_INTERFACE
    links = await _links(launcher.pid, "addr", "show")
    plan = masquerade_batch(links, uid=launcher.uid, target=target)
    await netns.batch(launcher.pid, ip=plan.ip, sysctls=plan.sysctls, nft=plan.nft)
    dual = plan.dual
    return WiredInterface(
        name=target.name,
        binding=Binding.MASQUERADE,
        tap=podnet.tap_name(target.index),
        bridge=podnet.bridge_name(pod_if),
        guest_ip=target.guest_range.guest,
        prefix=target.guest_range.prefix,
        server_ip=target.guest_range.gateway,
        gateway=target.guest_range.gateway,
        mac=target.mac,
        mtu=int(links[pod_if].get("mtu", 1500)),
        guest_ip6=target.guest_range6.guest if dual else "",
        prefix6=target.guest_range6.prefix if dual else 0,
    )


def _inet(link: dict[str, Any]) -> tuple[str, int]:
    for info in link.get("addr_info", ()):
        if info.get("family") == "inet" and info.get("scope", "global") == "global":
            return str(info["local"]), int(info["prefixlen"])
    raise WiringError(f"the pod interface {link.get('ifname')} has no IPv4 address to hand over")


def guest_routes(
    routes: Sequence[dict[str, Any]], *, pod_if: str
) -> tuple[str | None, tuple[Route, ...]]:
    """The pod's default gateway and its other routes through a gateway, for the guest."""
    default, extra = None, []
    for r in routes:
        if r.get("dev") != pod_if or not r.get("gateway"):
            continue
        if r.get("dst") == "default":
            default = default or str(r["gateway"])
        else:
            dst = str(ipaddress.ip_network(r["dst"], strict=False))
            extra.append(Route(destination=dst, gateway=str(r["gateway"])))
    return default, tuple(extra)


def random_mac() -> str:
    tail = secrets.token_bytes(5)
    return ":".join(f"{b:02x}" for b in (b"\x02" + tail))


async def bridge(launcher: Launcher, target: Target) -> WiredInterface:
    """The pod interface's address and MAC handed to the guest; the interface joins the
    bridge. A secondary (multus) interface without an address is bridged at layer 2 only."""
    pid, pod_if = launcher.pid, target.pod_interface
    found = await netns.ip_json(pid, "-4", "addr", "show", "dev", pod_if)
    inet = _inet(found[0]) if found and found[0].get("addr_info") else None
    if inet is None and pod_if == podnet.POD_INTERFACE:
        raise WiringError(f"the pod interface {pod_if} has no IPv4 address to hand over")
    gateway, routes = guest_routes(await netns.ip_json(pid, "-4", "route", "show"), pod_if=pod_if)
    (info,) = await netns.ip_json(pid, "link", "show", "dev", pod_if)
    mtu, pod_mac = int(info.get("mtu", 1500)), str(info["address"])
    br, tap = podnet.bridge_name(pod_if), podnet.tap_name(target.index)
    cmds = bridge_and_tap(
        await _links(pid), bridge=br, tap=tap, mtu=mtu, uid=launcher.uid,
        multi_queue=target.multi_queue,
    )  # fmt: skip
    if inet is not None:
        cmds.append(["addr", "del", f"{inet[0]}/{inet[1]}", "dev", pod_if])
    cmds += [
        ["link", "set", pod_if, "down"],
        ["link", "set", pod_if, "address", random_mac()],
        ["link", "set", pod_if, "master", br, "up"],
        ["addr", "replace", f"{podnet.BRIDGE_DHCP_SERVER}/32", "dev", br],
    ]
    await netns.batch(pid, ip=cmds)
    address, prefix = inet if inet is not None else ("", 0)
    log.info("pod_address_moved_to_guest", pod_interface=pod_if, address=address,
             mac=target.mac or pod_mac)  # fmt: skip
    return WiredInterface(
        name=target.name,
        binding=Binding.BRIDGE,
        tap=tap,
        bridge=br,
        guest_ip=address,
        prefix=prefix,
        server_ip=podnet.BRIDGE_DHCP_SERVER,
        gateway=gateway,
        mac=target.mac or pod_mac,
        mtu=mtu,
        routes=routes,
    )
