"""The IPv6 half of a real-node cluster's addresses: a unique local prefix the tooling owns.

The /48 is ``fd`` followed by the first 40 bits of sha256("kubevirt-py"): RFC 4193's
pseudo-random global ID, derived rather than drawn so every machine and every run agree
(``fd0d:4a03:aeea::/48``). Its 16-bit subnet ID is ``block << 8 | third``, mirroring the
IPv4 block (netplan.py): block *b* owns ``fd0d:4a03:aeea:bXX::/56`` and inside it

- ``:b00::/64``   the node network: the host's bridge ``::1``, node *i* ``::(10+i)``;
- ``:b0i::/64``   node *i*'s pod range (i = 1..12), its CNI bridge gateway ``::1``;
- ``:b0f::/112``  the Service range (kube-apiserver takes at most 20 host bits).

Nothing here leaves the machine: a unique local prefix is never routed on the internet,
the node namespaces have no IPv6 default route, and IPv6 forwarding is on only inside
the node namespaces (the host keeps its own setting and only learns routes to the pod
ranges via its bridge, as for IPv4).
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass

SEED = b"kubevirt-py"
SERVICE_THIRD = 15  # the Service range's subnet inside the block (as .15.0/24 in IPv4)


def ula_prefix() -> ipaddress.IPv6Network:
    """The tooling's /48: fd + 40 bits of sha256(SEED)."""
    global_id = int.from_bytes(hashlib.sha256(SEED).digest()[:5])
    return ipaddress.IPv6Network(((0xFD << 120) | (global_id << 80), 48))


@dataclass(frozen=True, slots=True, kw_only=True)
class NetPlan6:
    """One cluster's IPv6 ranges, from its block number (the IPv4 plan's)."""

    block: int

    def _subnet(self, third: int) -> int:
        return int(ula_prefix().network_address) | ((self.block << 8 | third) << 64)

    def _addr(self, third: int, host: int) -> str:
        return str(ipaddress.IPv6Address(self._subnet(third) + host))

    @property
    def cluster_cidr(self) -> str:
        return f"{self._addr(0, 0)}/56"

    @property
    def node_cidr(self) -> str:
        return f"{self._addr(0, 0)}/64"

    @property
    def gateway(self) -> str:
        """The host's address on the node network (the bridge's)."""
        return self._addr(0, 1)

    @property
    def service_cidr(self) -> str:
        return f"{self._addr(SERVICE_THIRD, 0)}/112"

    def node_ip(self, index: int) -> str:
        return self._addr(0, 10 + index)

    def pod_cidr(self, index: int) -> str:
        return f"{self._addr(index, 0)}/64"

    def pod_gateway(self, index: int) -> str:
        return self._addr(index, 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeV6:
    """One node's IPv6 addresses (beside NodeLayout's IPv4 ones)."""

    node_ip: str
    pod_cidr: str
    pod_gateway: str
    cluster_cidr: str
    routes: tuple[tuple[str, str], ...] = ()  # (other node's pod range, via its node IP)


def node_v6(plan: NetPlan6, *, index: int, nodes: int) -> NodeV6:
    """Node ``index``'s (1-based, of ``nodes``) IPv6 addresses and routes."""
    others = tuple((plan.pod_cidr(j), plan.node_ip(j)) for j in range(1, nodes + 1) if j != index)
    return NodeV6(
        node_ip=plan.node_ip(index),
        pod_cidr=plan.pod_cidr(index),
        pod_gateway=plan.pod_gateway(index),
        cluster_cidr=plan.cluster_cidr,
        routes=others,
    )
