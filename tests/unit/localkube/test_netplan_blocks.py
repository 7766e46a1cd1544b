"""Real-node clusters' address blocks never overlap the addresses other tooling on this
machine claims inside 198.18.0.0/15: process-mode clusters' host addresses and Service range,
and bench-network's namespaces (a shared prefix would route the apiserver's dials astray)."""

from __future__ import annotations

import ipaddress

from localkube import hostaddr, pki
from localkube.realnode.netplan import BLOCKS, SUPERNET, NetPlan

OTHER_TOOLING = [
    hostaddr.BLOCK,
    ipaddress.ip_network(pki.SERVICE_CIDR),
    ipaddress.ip_network("198.19.250.0/23"),  # scripts/bench/bench_network.py
]


def test_no_block_overlaps_other_tooling() -> None:
    """Every block a real-node cluster may pick is inside the /15 and clear of the others."""
    for block in range(BLOCKS):
        net = ipaddress.ip_network(NetPlan(block=block).cluster_cidr)
        assert net.subnet_of(SUPERNET)  # type: ignore[arg-type]
        for other in OTHER_TOOLING:
            assert not net.overlaps(other), (block, other)
