"""Two real-node clusters peered (localkube/realnode/peering.py): the routes each node
namespace gets, the veth pair's names, the record both state dirs keep; and the names a
session's second cluster gets (localkube/testing.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from localkube.config import NodeKind
from localkube.realnode import peering
from localkube.realnode.peering import Peering, PeerSide, Route, routes_to
from localkube.testing import PEER_NODES, private_cluster_config


def _sides(tmp_path: Path) -> tuple[PeerSide, PeerSide]:
    a = PeerSide(state_dir=tmp_path / "a", block=0, nodes=("node01", "node02"))
    b = PeerSide(state_dir=tmp_path / "b", block=3, nodes=("peer01",))
    return a, b


def test_routes_to_a_peer_are_its_node_network_on_link_then_its_pod_ranges(
    tmp_path: Path,
) -> None:
    """The peer's node /24 out of eth0 first (the next routes' gateways are on it), then
    each of its nodes' pod /24 via that node's address."""
    a, b = _sides(tmp_path)
    assert routes_to(a) == (
        Route(dest="198.18.0.0/24"),
        Route(dest="198.18.1.0/24", via="198.18.0.11"),
        Route(dest="198.18.2.0/24", via="198.18.0.12"),
    )
    assert routes_to(b) == (
        Route(dest="198.18.48.0/24"),
        Route(dest="198.18.49.0/24", via="198.18.48.11"),
    )
    assert Route(dest="198.18.48.0/24").args() == ("198.18.48.0/24", "dev", "eth0", "scope", "link")
    assert Route(dest="198.18.49.0/24", via="198.18.48.11").args() == (
        "198.18.49.0/24",
        "via",
        "198.18.48.11",
    )


def test_every_node_of_each_side_gets_the_routes_to_the_other(tmp_path: Path) -> None:
    """A's two nodes each get B's routes in their own namespace; B's node gets A's; nothing
    is routed on the host (only namespaces the tooling made appear)."""
    a, b = _sides(tmp_path)
    joined = Peering(a=a, b=b)
    by_ns: dict[str, list[Route]] = {}
    for netns, route in joined.node_routes():
        by_ns.setdefault(netns, []).append(route)
    assert by_ns == {
        "kv0-node01": list(routes_to(b)),
        "kv0-node02": list(routes_to(b)),
        "kv3-peer01": list(routes_to(a)),
    }
    assert joined.links == ("kvp0to3", "kvp3to0")
    assert all(len(name) <= 15 for name in Peering(a=PeerSide(state_dir=tmp_path, block=30,
               nodes=()), b=PeerSide(state_dir=tmp_path, block=29, nodes=())).links)  # fmt: skip


def test_a_cluster_cannot_peer_with_itself(tmp_path: Path) -> None:
    """Same block on both sides: refused, naming the block."""
    a, _ = _sides(tmp_path)
    with pytest.raises(ValueError, match="block 0"):
        Peering(a=a, b=a)


def test_the_record_is_kept_in_both_state_dirs_and_forgotten(tmp_path: Path) -> None:
    """``_record`` adds a peering to a state dir's peers.json once (round trip through
    JSON), removes it again (the file gone when empty); a dir that is gone records
    nothing."""
    a, b = _sides(tmp_path)
    joined = Peering(a=a, b=b)
    a.state_dir.mkdir()
    for _ in range(2):
        peering._record(a.state_dir, joined, keep=True)
    peering._record(b.state_dir, joined, keep=True)  # b's dir does not exist
    assert peering.recorded(a.state_dir) == [joined]
    assert peering.recorded(b.state_dir) == []
    peering._record(a.state_dir, joined, keep=False)
    assert not (a.state_dir / peering.RECORD).exists()


def test_a_named_session_cluster_has_its_own_dirs_and_one_node() -> None:
    """A session's second real-node cluster: state and nodes dirs apart from the first's
    (so its netns, veth and cgroup names differ by block and the reaper finds it by name),
    one node."""
    first = private_cluster_config(Path("/bin"), session=42, kind=NodeKind.KUBELET)
    second = private_cluster_config(Path("/bin"), session=42, kind=NodeKind.KUBELET, name="b")
    assert first.state_dir.name == "test-42-kubelet"
    assert second.state_dir.name == "test-42-kubelet-b"
    assert str(second.nodes_dir) == "/var/lib/kvt42kb"
    assert second.nodes == PEER_NODES and first.nodes == ("node01", "node02")
