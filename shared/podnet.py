"""The pod network wiring contract between virt-handler and virt-launcher.

KubeVirt's split: virt-handler (privileged, in the node's PID namespace) wires the launcher
pod's network namespace before the launcher defines its domain; the launcher (no network
privileges) only opens what was made for it. Here:

1. the handler enters the launcher pod's network namespace (the launcher's PID, read from
   its command socket's peer credentials) and makes, per wired interface, a bridge
   (`bridge_name`) and a tap (`tap_name`) owned by the launcher's user, so QEMU opens it
   without privileges (libvirt's `<interface type='ethernet'>`, `managed='no'`);
   - masquerade: the bridge holds the guest range's gateway (`MASQUERADE_GATEWAY`, or the
     first address of the pod network's `vmNetworkCIDR`), the guest gets the next one
     (`MASQUERADE_GUEST`) by DHCP, nftables in the pod's namespace DNAT the pod's TCP/UDP
     ports (all, or the interface's `ports`) to the guest and masquerade what the guest sends out;
     on a dual-stack pod the same in IPv6 (`vmIPv6NetworkCIDR`, KubeVirt's fd10:0:2::/120:
     the bridge ::1, the guest ::2 by DHCPv6, NAT66 in an `ip6` table);
   - bridge: the pod interface's address leaves it (recorded here first), the interface
     joins the bridge with a new MAC, and the guest gets the pod's address and MAC by DHCP;
2. the handler then writes `NETWORK_FILE` in the pod's `private` volume, atomically: the
   file is the "network ready" signal, and what the launcher's XML and DHCP responder read.
   A node that cannot wire (the launcher shares the handler's namespace, its PID is not
   visible, a tool is missing) writes the file with `user_mode_reason` set: masquerade then
   falls back to QEMU's user-mode network and both sides say why.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

NETWORK_FILE = "pod-network.json"  # in the launcher pod's `private` volume

# Masquerade: the guest's range exists only inside the pod's network namespace (KubeVirt's).
MASQUERADE_GATEWAY = "10.0.2.1"
MASQUERADE_GUEST = "10.0.2.2"
MASQUERADE_PREFIX = 24
MASQUERADE_CIDR = f"10.0.2.0/{MASQUERADE_PREFIX}"  # KubeVirt's default vmNetworkCIDR
MASQUERADE_CIDR6 = "fd10:0:2::/120"  # KubeVirt's default vmIPv6NetworkCIDR
# The gateway bridge's MAC, the same in every pod: a guest migrated to another pod keeps
# reaching its gateway through the neighbour entry it has.
MASQUERADE_GATEWAY_MAC = "02:00:00:6b:76:01"
# Bridge binding: the DHCP responder's own address on the bridge (KubeVirt's fake one).
BRIDGE_DHCP_SERVER = "169.254.75.10"
POD_INTERFACE = "eth0"  # the pod's primary interface (the CNI's)
NFT_TABLE = "kubevirt_py_nat"


@dataclass(frozen=True, slots=True, kw_only=True)
class GuestRange:
    """Masquerade's guest range inside the pod: the gateway (the in-pod bridge) and the
    guest's address, the first two of the range, as KubeVirt assigns them."""

    gateway: str = MASQUERADE_GATEWAY
    guest: str = MASQUERADE_GUEST
    prefix: int = MASQUERADE_PREFIX


def guest_range(vm_network_cidr: str | None) -> GuestRange:
    """The range of networks[].pod.vmNetworkCIDR (admission checked it: IPv4, prefix ≤ 30),
    KubeVirt's 10.0.2.0/24 when unset."""
    net = ipaddress.IPv4Network(vm_network_cidr or MASQUERADE_CIDR, strict=False)
    first = net.network_address
    return GuestRange(gateway=str(first + 1), guest=str(first + 2), prefix=net.prefixlen)


def guest_range6(vm_ipv6_network_cidr: str | None) -> GuestRange:
    """The range of networks[].pod.vmIPv6NetworkCIDR (admission checked it: IPv6, prefix
    ≤ 126), KubeVirt's fd10:0:2::/120 when unset: the gateway ::1, the guest ::2."""
    net = ipaddress.IPv6Network(vm_ipv6_network_cidr or MASQUERADE_CIDR6, strict=False)
    first = net.network_address
    return GuestRange(gateway=str(first + 1), guest=str(first + 2), prefix=net.prefixlen)


class Binding(StrEnum):
    MASQUERADE = "masquerade"
    BRIDGE = "bridge"
    MANAGED_TAP = "managedTap"  # a binding plugin's: bridge + tap, no addresses of ours
    TAP = "tap"  # a binding plugin's: the tap its CNI made


def tap_name(index: int) -> str:
    """The tap of the VMI's `index`-th interface (`interfaces[]` order)."""
    return f"tap{index}"


def bridge_name(pod_interface: str) -> str:
    """The in-pod bridge in front of pod interface `pod_interface` (≤ 15 characters)."""
    return f"k6t-{pod_interface}"[:15]


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    destination: str  # CIDR
    gateway: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WiredInterface:
    """One VMI interface wired in the pod: what the XML and the DHCP responder need."""

    name: str  # interfaces[].name
    binding: Binding
    tap: str
    bridge: str
    guest_ip: str
    prefix: int
    server_ip: str  # the DHCP responder's address (and server identifier)
    gateway: str | None  # the guest's default route
    mac: str | None = None  # the guest's MAC when the wiring decides it (bridge)
    mtu: int = 1500
    routes: tuple[Route, ...] = ()  # more routes for the guest (classless static routes)
    # masquerade on a dual-stack pod: the guest's IPv6 address (DHCPv6, launcher/dhcp6.py)
    # and prefix; "" when the pod has no IPv6 address
    guest_ip6: str = ""
    prefix6: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class PodWiring:
    interfaces: tuple[WiredInterface, ...] = ()
    user_mode_reason: str = ""  # non-empty: the node could not wire; masquerade is user-mode
    unwired: tuple[str, ...] = field(default=())  # interfaces left as they were (by name)

    def interface(self, name: str) -> WiredInterface | None:
        return next((i for i in self.interfaces if i.name == name), None)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PodWiring:
        raw: dict[str, Any] = json.loads(text)
        return cls(
            interfaces=tuple(_interface(i) for i in raw.get("interfaces", ())),
            user_mode_reason=str(raw.get("user_mode_reason", "")),
            unwired=tuple(raw.get("unwired", ())),
        )


def _interface(raw: dict[str, Any]) -> WiredInterface:
    values = dict(raw)
    values["binding"] = Binding(values["binding"])
    values["routes"] = tuple(Route(**r) for r in values.get("routes", ()))
    return WiredInterface(**values)


def read(path: Path) -> PodWiring | None:
    """The contract file at `path`, or None while the handler has not written it."""
    try:
        return PodWiring.from_json(path.read_text())
    except FileNotFoundError:
        return None


def write(path: Path, network: PodWiring) -> None:
    """Atomically (the file's appearance is the ready signal)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(network.to_json())
    tmp.rename(path)


def nic_queues(*, multiqueue: bool | None, model: str | None, vcpus: int) -> int:
    """KubeVirt's networkInterfaceMultiqueue: a virtio NIC gets one queue per vCPU (the
    handler makes its tap multi-queue, the launcher asks libvirt for the queues); 1
    otherwise."""
    if multiqueue is True and (model or "virtio") == "virtio" and vcpus > 1:
        return vcpus
    return 1
