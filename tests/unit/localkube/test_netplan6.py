"""The real-node cluster's IPv6 half: the tooling's unique local prefix, dual-stack configs."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest
import yaml

from localkube.pki import Pki
from localkube.realnode import configs
from localkube.realnode.configs import NodeLayout
from localkube.realnode.fleet import apiserver_flags
from localkube.realnode.netplan import BLOCKS, NetPlan
from localkube.realnode.netplan6 import node_v6, ula_prefix

ULA = ipaddress.ip_network("fd00::/8")


def test_the_prefix_is_a_derived_unique_local_48() -> None:
    """The /48 is fd + 40 bits of sha256("kubevirt-py"): the same on every machine, the
    one docs/local-cluster.md names."""
    prefix = ula_prefix()
    assert str(prefix) == "fd0d:4a03:aeea::/48"
    assert prefix.subnet_of(ULA)  # type: ignore[arg-type]


@pytest.mark.parametrize("block", [0, 7, BLOCKS - 1])
def test_every_v6_range_is_inside_the_prefix_and_disjoint(block: int) -> None:
    """Node, pod and Service ranges of a block lie in its /56 of the tooling's /48 and do not
    overlap; the Service range has at most 20 host bits (kube-apiserver's limit)."""
    v6 = NetPlan(block=block).v6
    cluster = ipaddress.ip_network(v6.cluster_cidr)
    assert cluster.subnet_of(ula_prefix())  # type: ignore[arg-type]
    nets = [ipaddress.ip_network(v6.node_cidr), ipaddress.ip_network(v6.service_cidr)]
    nets += [ipaddress.ip_network(v6.pod_cidr(i)) for i in (1, 2, 12)]
    for net in nets:
        assert net.subnet_of(cluster)  # type: ignore[arg-type]
    for a in nets:
        for b in nets:
            assert a is b or not a.overlaps(b)
    assert nets[1].prefixlen >= 108
    assert ipaddress.ip_address(v6.gateway) in nets[0]
    assert ipaddress.ip_address(v6.node_ip(1)) in nets[0]
    assert ipaddress.ip_address(v6.pod_gateway(2)) in nets[3]


def test_blocks_v6_ranges_are_disjoint() -> None:
    """Two clusters on the machine never share IPv6 addresses."""
    a, b = NetPlan(block=0).v6, NetPlan(block=1).v6
    assert not ipaddress.ip_network(a.cluster_cidr).overlaps(ipaddress.ip_network(b.cluster_cidr))


def _layout(tmp_path: Path, *, dual: bool) -> NodeLayout:
    plan = NetPlan(block=3)
    return NodeLayout(
        name="node01",
        dir=tmp_path / "node01",
        node_ip=plan.node_ip(1),
        pod_cidr=plan.pod_cidr(1),
        pod_gateway=plan.pod_gateway(1),
        cluster_cidr=plan.cluster_cidr,
        cgroup_root="/kvpy3-node01",
        routes=((plan.pod_cidr(2), plan.node_ip(2)),),
        v6=node_v6(plan.v6, index=1, nodes=2) if dual else None,
    )


def test_cni_gives_pods_both_families_ipv4_first(tmp_path: Path) -> None:
    """A dual-stack node's bridge network hands each pod an IPv4 address (first, as before)
    and one from the node's IPv6 range, with a default route of each family; an IPv4-only
    layout writes the IPv4 network unchanged."""
    plan = NetPlan(block=3)
    dual = json.loads(configs.cni_conflist(_layout(tmp_path, dual=True)))
    ipam = dual["plugins"][0]["ipam"]
    assert ipam["ranges"] == [
        [{"subnet": plan.pod_cidr(1), "gateway": plan.pod_gateway(1)}],
        [{"subnet": plan.v6.pod_cidr(1), "gateway": plan.v6.pod_gateway(1)}],
    ]
    assert ipam["routes"] == [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]
    single = json.loads(configs.cni_conflist(_layout(tmp_path, dual=False)))
    assert single["plugins"][0]["ipam"]["ranges"] == ipam["ranges"][:1]
    assert single["plugins"][0]["ipam"]["routes"] == [{"dst": "0.0.0.0/0"}]


def test_kube_proxy_and_kubelet_are_dual_stack(tmp_path: Path) -> None:
    """kube-proxy knows both cluster ranges and serves node ports on both node addresses;
    the kubelet reports both node IPs, IPv4 first."""
    plan, node = NetPlan(block=3), _layout(tmp_path, dual=True)
    proxy = yaml.safe_load(configs.kube_proxy_yaml(node, kubeconfig=Path("/k")))
    assert proxy["clusterCIDR"] == f"{plan.cluster_cidr},{plan.v6.cluster_cidr}"
    assert proxy["nodePortAddresses"] == [f"{plan.node_ip(1)}/32", f"{plan.v6.node_ip(1)}/128"]
    assert node.node_ips == f"{plan.node_ip(1)},{plan.v6.node_ip(1)}"
    assert node.v6 is not None and node.v6.routes == ((plan.v6.pod_cidr(2), plan.v6.node_ip(2)),)


def test_the_service_range_is_dual_stack_ipv4_first(tmp_path: Path) -> None:
    """kube-apiserver's Service range lists IPv4 first: Services stay IPv4 unless they ask
    for IPv6 (ipFamilyPolicy), the `kubernetes` Service keeps its IPv4 address."""
    plan = NetPlan(block=2)
    (flag,) = [f for f in apiserver_flags(plan, Pki(tmp_path)) if f.startswith("--service-cluster")]
    assert flag == f"--service-cluster-ip-range={plan.service_cidr},{plan.v6.service_cidr}"
