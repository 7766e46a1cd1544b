"""The real nodes of one local cluster: addresses, certificates, start and teardown.

The control plane stays on the host; kube-apiserver listens on every host address (so the
host's tools keep using loopback) and advertises the cluster bridge's gateway, which is
where the ``kubernetes`` Service sends in-cluster clients and where nodes dial it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import structlog

from localkube import projectregistry, registry
from localkube.config import ClusterConfig
from localkube.pki import CertSpec, Pki, write_kubeconfig
from localkube.realnode import multus, noderes
from localkube.realnode.configs import NodeLayout
from localkube.realnode.namespaces import (
    NodeNamespaces,
    bridges_in_use,
    ensure_bridge,
    remove_bridge,
)
from localkube.realnode.netplan import NetPlan, node_index
from localkube.realnode.netplan6 import node_v6
from localkube.realnode.node import NodeInputs, RealNode

log = structlog.get_logger()

KUBE_PROXY_USER = "kube-proxy"
KUBELET_CLIENT = "apiserver-kubelet-client"


def load_plan(config: ClusterConfig) -> NetPlan:
    """The cluster's address block (picked once, kept in the state dir)."""
    return NetPlan.load_or_pick(config.paths.root / "net.json", taken=bridges_in_use())


def extra_certs() -> list[CertSpec]:
    """kube-proxy's identity (bound to system:node-proxier by default), multus' (bound by
    localkube/realnode/multus.py) and kube-apiserver's client certificate for the kubelets'
    logs/exec endpoints."""
    return [
        CertSpec(name=KUBE_PROXY_USER, cn="system:kube-proxy"),
        CertSpec(name=multus.USER, cn=f"system:{multus.USER}"),
        CertSpec(name=KUBELET_CLIENT, cn="kube-apiserver-kubelet-client", orgs=("system:masters",)),
    ]


def apiserver_flags(plan: NetPlan, pki: Pki) -> tuple[str, ...]:
    return (
        "--bind-address=0.0.0.0",
        f"--advertise-address={plan.gateway}",
        f"--service-cluster-ip-range={plan.service_cidr},{plan.v6.service_cidr}",
        "--endpoint-reconciler-type=lease",
        f"--kubelet-client-certificate={pki.crt(KUBELET_CLIENT)}",
        f"--kubelet-client-key={pki.key(KUBELET_CLIENT)}",
        "--kubelet-preferred-address-types=InternalIP",
    )


class Fleet:
    """Every real node of a cluster."""

    def __init__(self, config: ClusterConfig, *, marker: tuple[str, str]) -> None:
        self.config = config
        self.plan = load_plan(config)
        self.pki = Pki(config.paths.pki)
        self._marker = marker

    def server(self, port: int) -> str:
        return f"https://{self.plan.gateway}:{port}"

    def node(self, name: str) -> RealNode:
        plan, nodes, paths = self.plan, self.config.nodes, self.config.paths
        i = node_index(nodes, name)
        pulls = self.config.registry_dir is not None  # project images from the registry
        others = tuple(
            (plan.pod_cidr(j), plan.node_ip(j)) for j in range(1, len(nodes) + 1) if j != i
        )
        layout = NodeLayout(
            name=name,
            dir=self.config.nodes_dir / name,
            node_ip=plan.node_ip(i),
            pod_cidr=plan.pod_cidr(i),
            pod_gateway=plan.pod_gateway(i),
            cluster_cidr=plan.cluster_cidr,
            cgroup_root=f"/kvpy{plan.block}-{name}",
            routes=others,
            v6=node_v6(plan.v6, index=i, nodes=len(nodes)),
        )
        ns = NodeNamespaces(
            layout=layout, netns=plan.netns(name), host_veth=plan.host_veth(i), bridge=plan.bridge
        )
        inputs = NodeInputs(
            bin_dir=self.config.bin_dir,
            containerd_bin=self.config.containerd_bin,
            kubeconfig=paths.kubeconfig(f"node-{name}"),
            proxy_kubeconfig=paths.kubeconfig(KUBE_PROXY_USER),
            ca_file=self.pki.crt("ca"),
            logs=paths.logs,
            run=paths.run,
            marker=self._marker,
            images=projectregistry.imported(self.config.images) if pulls else self.config.images,
            multus_dir=self.config.multus_dir,
            multus_kubeconfig=paths.kubeconfig(multus.USER),
            resources=self.config.node_resources,
            registry_host=registry.host(plan) if pulls else None,
            project_registry_host=projectregistry.host(plan) if pulls else None,
        )
        return RealNode(ns=ns, inputs=inputs)

    def write_kubeconfigs(self, port: int) -> None:
        """Nodes and kube-proxy dial kube-apiserver on the gateway, from their namespaces."""
        server, paths = self.server(port), self.config.paths
        for user in [KUBE_PROXY_USER, multus.USER, *(f"node-{n}" for n in self.config.nodes)]:
            write_kubeconfig(paths.kubeconfig(user), server=server, pki=self.pki, user=user)

    async def prepare_network(self) -> None:
        await ensure_bridge(
            bridge=self.plan.bridge, gateway=self.plan.gateway, gateway6=self.plan.v6.gateway
        )
        if multus.built(self.config.multus_dir):
            await multus.ensure_host_bridge(self.plan.secondary_bridge)
            # The host on the migration link (.13.1, as .0.1 on the node network): tests
            # reach the proxies' ports there as any peer on that network could.
            await ensure_bridge(bridge=self.plan.migration_bridge, gateway=self.plan.migration_host)

    async def start_runtimes(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for name in self.config.nodes:
                tg.create_task(self.node(name).start_runtime())
        if not multus.built(self.config.multus_dir):
            return
        for i, name in enumerate(self.config.nodes, start=1):
            await multus.ensure_link(
                netns=self.plan.netns(name),
                host_veth=self.plan.secondary_veth(i),
                host_bridge=self.plan.secondary_bridge,
            )
            await multus.ensure_link(
                netns=self.plan.netns(name),
                host_veth=self.plan.migration_veth(i),
                host_bridge=self.plan.migration_bridge,
                node_link=multus.MIGRATION_LINK,
                node_bridge=multus.MIGRATION_BRIDGE,
            )

    async def forget_stale(self, served: dict[str, str]) -> None:
        """Each node drops its copy of a served image the registry now serves at another
        digest (RealNode.forget_stale)."""
        async with asyncio.TaskGroup() as tg:
            for name in self.config.nodes:
                tg.create_task(self.node(name).forget_stale(served))

    def start_kubelets(self) -> None:
        """After the host's hugepages are reserved: a kubelet reads its capacity at start."""
        noderes.reserve_hugepages(self.config.paths.root, self.config.node_resources.hugepages_2mi)
        for name in self.config.nodes:
            self.node(name).start_kubelet()

    async def down(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for name in self.config.nodes:
                tg.create_task(self.node(name).stop())
        noderes.release_hugepages(self.config.paths.root)
        await remove_bridge(self.plan.bridge)
        await remove_bridge(self.plan.secondary_bridge)
        await remove_bridge(self.plan.migration_bridge)
        log.info("real_nodes_down", bridge=self.plan.bridge)

    def kubelet_log(self, node: str) -> Path:
        return self.node(node).specs()["kubelet"].log_file
