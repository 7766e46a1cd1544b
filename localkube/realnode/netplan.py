"""Addresses of a cluster with real nodes, all inside 198.18.0.0/15 (reserved for benchmarks,
never routed on the internet).

The /15 is cut into 32 blocks of /20, one per cluster on this machine (a demo cluster and a
test session's can run side by side); the last block (198.19.240.0/20) is never handed out:
process-mode clusters' host addresses and Service range (localkube/hostaddr.py, pki.py) and
bench-network's namespaces live there. Inside a block:

- ``.0.0/24``   the node network: the host's bridge is ``.0.1`` (kube-apiserver listens
  there), node *i* is ``.0.(10+i)``;
- ``.i.0/24``   node *i*'s pod range (i = 1..12), its CNI bridge gateway ``.i.1``;
- ``.13.0/24``  the migration network: a third host bridge (the host ``.13.1``) joins every
  node's ``mig0`` link; the handler pods' ``migration0`` (the KubeVirt CR's
  ``migrations.network``) take addresses from it (localkube/realnode/multus.py);
- ``.14.0/24``  the secondary (multus) network: a second host bridge joins every node's
  ``sec0`` link, layer 2 only (localkube/realnode/multus.py);
- ``.15.0/24``  the Service range; ``.15.1`` is the ``kubernetes`` Service.

Each block has an IPv6 twin in the tooling's unique local prefix (netplan6.py): the pod
and Service networks are dual-stack, IPv4 first.

Nothing here is routed or masqueraded out of the machine: the node namespaces have no
default route, and the host only learns routes to the block's pod ranges via its bridge.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from localkube.realnode.netplan6 import NetPlan6

SUPERNET = ipaddress.ip_network("198.18.0.0/15")
BLOCKS = 31  # of the /15's 32: the last is the process-mode clusters' and benches' (above)
MAX_NODES = 12
MIGRATION_THIRD = 13  # the migration network's /24 inside the block
SECONDARY_THIRD = 14  # the secondary network's /24 inside the block


class NetPlanError(Exception):
    """No free block, or a node index out of range."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NetPlan:
    """One cluster's addresses and interface names, derived from its block number."""

    block: int

    @property
    def _base(self) -> int:
        return int(SUPERNET.network_address) + self.block * 4096

    def _addr(self, third: int, fourth: int) -> str:
        return str(ipaddress.ip_address(self._base + third * 256 + fourth))

    @property
    def v6(self) -> NetPlan6:
        """The block's IPv6 ranges (the cluster is dual-stack: localkube/realnode/netplan6.py)."""
        return NetPlan6(block=self.block)

    @property
    def cluster_cidr(self) -> str:
        return f"{self._addr(0, 0)}/20"

    @property
    def node_cidr(self) -> str:
        return f"{self._addr(0, 0)}/24"

    @property
    def gateway(self) -> str:
        """The host's address on the node network, where kube-apiserver listens."""
        return self._addr(0, 1)

    @property
    def service_cidr(self) -> str:
        return f"{self._addr(15, 0)}/24"

    @property
    def kubernetes_service_ip(self) -> str:
        return self._addr(15, 1)

    @property
    def bridge(self) -> str:
        return f"kvbr{self.block}"

    @property
    def secondary_bridge(self) -> str:
        """The host bridge of the secondary network (no address: layer 2 between nodes)."""
        return f"kvsb{self.block}"

    def secondary_addr(self, host: int) -> str:
        """Address ``host`` (1..254) of the secondary network's /24."""
        return self._addr(SECONDARY_THIRD, host)

    def secondary_veth(self, index: int) -> str:
        """The host end of node *i*'s secondary link (the node end is ``sec0``)."""
        return f"kv{self.block}s{self._check(index)}"

    @property
    def migration_bridge(self) -> str:
        """The host bridge of the migration network (no address: layer 2 between nodes)."""
        return f"kvmb{self.block}"

    @property
    def migration_cidr(self) -> str:
        return f"{self._addr(MIGRATION_THIRD, 0)}/24"

    @property
    def migration_host(self) -> str:
        """The host's address on the migration network (host-local never hands out .1)."""
        return self._addr(MIGRATION_THIRD, 1)

    def migration_veth(self, index: int) -> str:
        """The host end of node *i*'s migration link (the node end is ``mig0``)."""
        return f"kv{self.block}m{self._check(index)}"

    def node_ip(self, index: int) -> str:
        return self._addr(0, 10 + self._check(index))

    def pod_cidr(self, index: int) -> str:
        return f"{self._addr(self._check(index), 0)}/24"

    def pod_gateway(self, index: int) -> str:
        return self._addr(self._check(index), 1)

    def netns(self, node: str) -> str:
        return f"kv{self.block}-{node}"

    def host_veth(self, index: int) -> str:
        """The host end of node *i*'s veth (the node end is renamed eth0)."""
        return f"kv{self.block}n{self._check(index)}"

    @staticmethod
    def _check(index: int) -> int:
        if not 1 <= index <= MAX_NODES:
            raise NetPlanError(f"node index {index} outside 1..{MAX_NODES}")
        return index

    @classmethod
    def load_or_pick(cls, path: Path, *, taken: set[int]) -> NetPlan:
        """The block saved in ``path``; else the lowest block not in ``taken``, saved."""
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            pass
        for block in range(BLOCKS):
            if block not in taken:
                plan = cls(block=block)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(asdict(plan)) + "\n")
                return plan
        raise NetPlanError(f"all {BLOCKS} address blocks of {SUPERNET} are in use")


def node_index(nodes: tuple[str, ...], node: str) -> int:
    """1-based position of ``node`` in the cluster's node list."""
    return nodes.index(node) + 1
