"""Two real-node clusters of this machine peered, so that pods and nodes of one reach those
of the other (decentralized live migration between clusters, docs/migration.md).

Nothing is routed by the host: the two clusters' node-network bridges (``kvbr<A>`` and
``kvbr<B>``) are joined at layer 2 by a veth pair the tooling owns (``kvp<A>to<B>`` on A's
bridge, ``kvp<B>to<A>`` on B's), and each node namespace gets

- an on-link route to the other block's node /24 (both node networks share one segment),
- a route to each of the other cluster's pod /24s via that cluster's node owning it,

so a pod's packet leaves through its node, crosses the joined segment and enters the other
cluster's node, which forwards it to its pod, and the reply takes the mirror path. The CNI
bridge does not masquerade (``ipMasq: false``, configs.py) and kube-proxy only rewrites
Service traffic, so a pod sees the other cluster's pod address as the source.

The host keeps one address on each bridge; on a joined segment it would otherwise answer
ARP for either address on either bridge, so both bridges answer only for their own
address while peered (``arp_ignore=1``; set back on undo).

A peering is recorded in both clusters' state dirs (``peers.json``): ``Cluster.down`` of
either undoes it (the veth pair, the routes in the namespaces still there, the ARP
setting), so no veth or route outlives the clusters, whatever stops first.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from localkube.errors import CommandFailed
from localkube.procs import run_cmd
from localkube.realnode.namespaces import NETNS_DIR
from localkube.realnode.netplan import NetPlan

log = structlog.get_logger()

RECORD = "peers.json"
NODE_LINK = "eth0"  # the node's end of its veth on the node network (namespaces.py)


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerSide:
    """One cluster of a peering: where its state lives, its block, its node names."""

    state_dir: Path
    block: int
    nodes: tuple[str, ...]

    @property
    def plan(self) -> NetPlan:
        return NetPlan(block=self.block)

    def to_dict(self) -> dict[str, Any]:
        return {"stateDir": str(self.state_dir), "block": self.block, "nodes": list(self.nodes)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PeerSide:
        return cls(
            state_dir=Path(data["stateDir"]), block=int(data["block"]), nodes=tuple(data["nodes"])
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """One route in a node namespace: ``via`` None is on-link (out of the node's eth0)."""

    dest: str
    via: str | None = None

    def args(self) -> tuple[str, ...]:
        """What follows ``ip route replace|del``."""
        if self.via is None:
            return (self.dest, "dev", NODE_LINK, "scope", "link")
        return (self.dest, "via", self.via)


def routes_to(peer: PeerSide) -> tuple[Route, ...]:
    """What every node of the other cluster needs to reach ``peer``'s nodes and pods: its
    node /24 on link first (the gateways of the next routes are there), then each node's pod
    range via that node."""
    plan = peer.plan
    pods = tuple(
        Route(dest=plan.pod_cidr(i), via=plan.node_ip(i)) for i in range(1, len(peer.nodes) + 1)
    )
    return (Route(dest=plan.node_cidr), *pods)


@dataclass(frozen=True, slots=True, kw_only=True)
class Peering:
    """Clusters ``a`` and ``b`` joined (see the module's docstring)."""

    a: PeerSide
    b: PeerSide

    def __post_init__(self) -> None:
        if self.a.block == self.b.block:
            raise ValueError(f"a cluster cannot peer with itself (block {self.a.block})")

    @property
    def links(self) -> tuple[str, str]:
        """The veth pair's ends: on A's bridge, on B's bridge."""
        return (f"kvp{self.a.block}to{self.b.block}", f"kvp{self.b.block}to{self.a.block}")

    def node_routes(self) -> tuple[tuple[str, Route], ...]:
        """(node namespace, route) for every node of both clusters."""
        found = []
        for side, other in ((self.a, self.b), (self.b, self.a)):
            for node in side.nodes:
                found += [(side.plan.netns(node), route) for route in routes_to(other)]
        return tuple(found)

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a.to_dict(), "b": self.b.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Peering:
        return cls(a=PeerSide.from_dict(data["a"]), b=PeerSide.from_dict(data["b"]))

    async def up(self) -> None:
        """Join the bridges, then the routes (idempotent); recorded in both state dirs first,
        so an interrupted ``up`` is undone with the clusters."""
        for side in (self.a, self.b):
            _record(side.state_dir, self, keep=True)
        end_a, end_b = self.links
        if not Path(f"/sys/class/net/{end_a}").exists():
            await run_cmd(["ip", "link", "add", end_a, "type", "veth", "peer", "name", end_b])
        for end, side in ((end_a, self.a), (end_b, self.b)):
            await run_cmd(["ip", "link", "set", end, "master", side.plan.bridge, "up"])
            _arp_ignore(side.plan.bridge, 1)
        for netns, route in self.node_routes():
            await run_cmd(["ip", "netns", "exec", netns, "ip", "route", "replace", *route.args()])
        log.info("clusters_peered", blocks=[self.a.block, self.b.block], link=end_a)

    async def down(self) -> None:
        """Undo ``up``: routes in the namespaces still there, the veth pair, the ARP setting
        of the bridges still there; then forget the record on both sides."""
        for netns, route in reversed(self.node_routes()):
            if (NETNS_DIR / netns).exists():
                with contextlib.suppress(CommandFailed):  # a route already gone
                    cmd = ["ip", "netns", "exec", netns, "ip", "route", "del", *route.args()]
                    await run_cmd(cmd)
        for end in self.links:
            if Path(f"/sys/class/net/{end}").exists():
                with contextlib.suppress(CommandFailed):  # gone with its peer meanwhile
                    await run_cmd(["ip", "link", "del", end])
        for side in (self.a, self.b):
            _record(side.state_dir, self, keep=False)
            if not recorded(side.state_dir):  # its bridge joined to no other cluster
                _arp_ignore(side.plan.bridge, 0)
        log.info("clusters_unpeered", blocks=[self.a.block, self.b.block])


def _arp_ignore(bridge: str, value: int) -> None:
    knob = Path(f"/proc/sys/net/ipv4/conf/{bridge}/arp_ignore")
    if knob.exists():
        knob.write_text(f"{value}\n")


def recorded(state_dir: Path) -> list[Peering]:
    """The peerings recorded in a cluster's state dir (none when it has no record)."""
    try:
        data = json.loads((state_dir / RECORD).read_text())
    except (OSError, ValueError):
        return []
    return [Peering.from_dict(item) for item in data]


def _record(state_dir: Path, peering: Peering, *, keep: bool) -> None:
    """Add (``keep``) or remove ``peering`` in the state dir's record (a dir that is gone
    records nothing)."""
    if not state_dir.is_dir():
        return
    others = [p for p in recorded(state_dir) if p != peering]
    items = [*others, peering] if keep else others
    path = state_dir / RECORD
    if items:
        path.write_text(json.dumps([p.to_dict() for p in items], indent=2) + "\n")
    else:
        path.unlink(missing_ok=True)


async def undo_recorded(state_dir: Path) -> None:
    """Undo every peering a cluster's state dir records (its ``down``)."""
    for peering in recorded(state_dir):
        await peering.down()
