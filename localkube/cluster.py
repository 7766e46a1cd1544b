"""The local cluster's lifecycle: up (idempotent), down (leaves nothing running), status.

Components run as detached processes tracked by pidfiles in the state directory, so
``up`` in one process and ``down`` in another (the CLI) see the same cluster. ``up``
starts only what is not already running and healthy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import structlog

from localkube import components, hostaddr
from localkube.components import Ports
from localkube.config import MARKER_ENV, ClusterConfig, NodeKind
from localkube.csi.stack import CsiStack
from localkube.errors import CommandFailed, ComponentFailed
from localkube.health import admin_ssl, insecure_ssl, probe
from localkube.pki import Pki, ensure_pki, write_kubeconfig
from localkube.procs import (
    carries_marker,
    marked_pids,
    mounts_under,
    reap_marked,
    run_cmd,
    spawn_detached,
    stop_process,
)
from localkube.realnode import multus, peering
from localkube.realnode.fleet import Fleet, apiserver_flags, extra_certs
from localkube.realnode.namespaces import kill_cgroup_tree, remove_cgroup_tree
from localkube.realnode.storage import LocalStorage
from localkube.registry import LocalRegistry
from localkube.tracked import Tracked

log = structlog.get_logger()

REGISTRIES = ("registry", "registry-public", "registry-writer")
CONTROL_PLANE = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


@dataclass(frozen=True, slots=True, kw_only=True)
class ComponentStatus:
    name: str
    pid: int | None
    healthy: bool
    detail: str


class Cluster:
    """One local cluster described by a ClusterConfig."""

    def __init__(self, config: ClusterConfig) -> None:
        kind_file = config.paths.root / "node-kind"
        if kind_file.exists():  # a cluster keeps the node kind it was made with
            config = config.replace(node_kind=NodeKind(kind_file.read_text().strip()))
        self.config = config
        self.paths = config.paths
        self.pki = Pki(config.paths.pki)
        self.marker = (MARKER_ENV, config.cluster_id)
        self._tracked = Tracked(config, marker=self.marker)

    @property
    def real_nodes(self) -> bool:
        return self.config.node_kind == NodeKind.KUBELET

    def fleet(self) -> Fleet:
        """The real nodes (kubelet clusters only)."""
        return Fleet(self.config, marker=self.marker)

    def node_component(self, node: str) -> str:
        """The process that makes ``node`` a node: its kubelet or its node agent."""
        return f"kubelet-{node}" if self.real_nodes else f"nodeagent-{node}"

    @property
    def kubeconfig(self) -> Path:
        return self.paths.admin_kubeconfig

    @property
    def host_address(self) -> str:
        """Where the apiserver dials host processes (process mode; localkube/hostaddr.py)."""
        return hostaddr.host_address(self.paths.root)

    @property
    def ports(self) -> Ports:
        return Ports.load_or_pick(self.paths.ports_file)

    async def up(self) -> None:
        """Start whatever is not running; return when every component is healthy and
        the default ServiceAccount exists (pods can be created)."""
        started = time.monotonic()
        self._check_binaries()
        for d in (self.paths.logs, self.paths.run, self.config.nodes_dir):
            d.mkdir(parents=True, exist_ok=True)
        idle = not any(self._tracked.running(name) for name in CONTROL_PLANE)
        ports = Ports.load_or_pick(self.paths.ports_file, repick_busy=idle)
        (self.paths.root / "node-kind").write_text(f"{self.config.node_kind}\n")
        if self.real_nodes:
            await self._up_real_nodes(ports)
        else:
            hostaddr.claim(self.paths.root, cluster_id=self.config.cluster_id)
            await ensure_pki(self.pki, self.config.nodes)
            self._write_kubeconfigs(ports)
            await self._start_control_plane(ports)
            async with asyncio.TaskGroup() as tg:
                for node in self.config.nodes:
                    tg.create_task(self.start_node_agent(node))
        await self._tracked.ensure(
            components.controller_manager(self.config, ports),
            f"{ports.server}/api/v1/namespaces/default/serviceaccounts/default",
            ssl_ctx=admin_ssl(self.pki),
        )
        log.info(
            "cluster_up",
            seconds=round(time.monotonic() - started, 1),
            kubeconfig=str(self.kubeconfig),
        )

    async def _up_real_nodes(self, ports: Ports) -> None:
        """Kubelet nodes: network, certificates for the gateway address, the registries (the
        project's images pushed while the control plane and each node's containerd and
        kubelet + kube-proxy start), storage, CSI, the guest in the registry, multus."""
        fleet = self.fleet()
        await fleet.prepare_network()
        plan = fleet.plan
        ips = (plan.kubernetes_service_ip, plan.gateway)
        await ensure_pki(self.pki, self.config.nodes, ips=ips, extra=extra_certs())
        registry = self.registry(fleet)
        if registry is not None:  # starts while the nodes come up; filled once they are
            await registry.start()
        self._write_kubeconfigs(ports)
        fleet.write_kubeconfigs(ports.apiserver)
        async with asyncio.TaskGroup() as tg:  # the project's images pushed meanwhile
            served = tg.create_task(registry.publish()) if registry is not None else None
            tg.create_task(self._start_nodes(ports, fleet))
        if served is not None:
            await fleet.forget_stale(served.result())
        await self.storage().up(
            kubectl=self.config.bin_dir / "kubectl",
            kubeconfig=self.kubeconfig,
            manifest=self.paths.root / "local-storage.json",
        )
        if self.config.csi_dir is not None:  # a peer cluster of the tests goes without
            await self.csi(fleet).up()
        if registry is not None:
            await registry.serve_guest()
        if multus.built(self.config.multus_dir):
            await multus.apply(
                kubectl=self.config.bin_dir / "kubectl",
                kubeconfig=self.kubeconfig,
                manifest=self.paths.root / "multus.json",
                extra=multus.migration_network(
                    cidr=fleet.plan.migration_cidr,
                    ipam_dir=multus.migration_ipam(self.config.nodes_dir),
                ),
            )

    async def _start_nodes(self, ports: Ports, fleet: Fleet) -> None:
        """Control plane, each node's containerd (its imports done), kubelets Ready."""
        extra = apiserver_flags(fleet.plan, self.pki)
        await self._start_control_plane(ports, apiserver_extra=extra)
        await fleet.start_runtimes()
        fleet.start_kubelets()
        since = time.time() - 1
        async with asyncio.TaskGroup() as tg:
            for node in self.config.nodes:
                tg.create_task(self._wait_ready(node, since=since))

    def csi(self, fleet: Fleet | None = None) -> CsiStack:
        """The CSI driver, its sidecars and classes (real nodes only)."""
        fleet = fleet or self.fleet()
        enter = {node: fleet.node(node).ns.enter() for node in self.config.nodes}
        return CsiStack(config=self.config, marker=self.marker, node_enter=enter)

    def peer_side(self) -> peering.PeerSide:
        """This cluster as one side of a peering (real nodes, once up)."""
        return peering.PeerSide(
            state_dir=self.paths.root, block=self.fleet().plan.block, nodes=self.config.nodes
        )

    async def peer(self, other: Cluster) -> peering.Peering:
        """Join this cluster's node network to ``other``'s (localkube/realnode/peering.py):
        pods and nodes of each reach the other's; ``down`` of either undoes it."""
        joined = peering.Peering(a=self.peer_side(), b=other.peer_side())
        await joined.up()
        return joined

    def registry(self, fleet: Fleet | None = None) -> LocalRegistry | None:
        """The registries (real nodes with scripts/build-registry's output only)."""
        if not self.real_nodes or self.config.registry_dir is None:
            return None
        return LocalRegistry(
            config=self.config, plan=(fleet or self.fleet()).plan, marker=self.marker
        )

    def storage(self) -> LocalStorage:
        """The real nodes' local PersistentVolumes and their StorageClass."""
        return LocalStorage(nodes=self.config.nodes, nodes_dir=self.config.nodes_dir)

    async def _wait_ready(self, node: str, *, since: float) -> None:
        await self._tracked.wait(
            self.node_component(node), lambda: self.node_ready(node, since=since), timeout=120
        )

    async def _start_control_plane(
        self, ports: Ports, *, apiserver_extra: tuple[str, ...] = ()
    ) -> None:
        ctl = insecure_ssl()
        await self._tracked.ensure(
            components.etcd(self.config, ports), f"http://127.0.0.1:{ports.etcd}/health"
        )
        await self._tracked.ensure(
            components.apiserver(self.config, ports, extra=apiserver_extra),
            f"{ports.server}/readyz",
            ssl_ctx=admin_ssl(self.pki),
            timeout=180,
        )
        await self._tracked.ensure(
            components.controller_manager(self.config, ports),
            f"https://127.0.0.1:{ports.controller_manager}/healthz",
            ssl_ctx=ctl,
        )
        await self._tracked.ensure(
            components.scheduler(self.config, ports),
            f"https://127.0.0.1:{ports.scheduler}/healthz",
            ssl_ctx=ctl,
        )

    async def down(self, *, purge: bool = False) -> None:
        """Stop the local Prometheus, the nodes (and their pods), then the control plane;
        reap stragglers."""
        for name in ("prometheus", "prometheus-sd", *REGISTRIES):  # prometheus.py's, registry.py's
            await self._tracked.stop(name, grace=10)
        if self.real_nodes:
            await peering.undo_recorded(self.paths.root)
            if self.paths.ports_file.exists() and self.kubeconfig.exists():
                await self.storage().down(
                    kubectl=self.config.bin_dir / "kubectl", kubeconfig=self.kubeconfig
                )
            if (self.paths.root / "net.json").exists():
                csi = self.csi()
                await csi.stop()
                await self.fleet().down()
                await csi.release_loops()
            shutil.rmtree(multus.migration_ipam(self.config.nodes_dir), ignore_errors=True)
        else:
            async with asyncio.TaskGroup() as tg:
                for node in self.config.nodes:
                    tg.create_task(self._tracked.stop(f"nodeagent-{node}", grace=45))
            # Per-container cgroups of the node agents (a killed agent leaves them behind).
            agents_root = f"kvpy/{self.config.cluster_id}"
            await kill_cgroup_tree(agents_root)
            remove_cgroup_tree(agents_root)
            hostaddr.release(self.paths.root)
        for name in reversed(CONTROL_PLANE):
            await self._tracked.stop(name, grace=15)
        reaped = await reap_marked(self.marker)
        if reaped:
            log.warning("stragglers_reaped", pids=reaped)
        await self._unmount_leftovers()
        if purge:
            shutil.rmtree(self.config.nodes_dir, ignore_errors=True)
            shutil.rmtree(self.paths.root, ignore_errors=True)
        log.info("cluster_down", purged=purge)

    def kill_now(self) -> None:
        """SIGKILL every process of the cluster at once (a forced stop, from a signal
        handler); `down` then still ends the containers and unmounts and deletes."""
        for pid in list(marked_pids(self.marker)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        log.warning("cluster_killed", cluster=self.config.cluster_id)

    async def status(self) -> list[ComponentStatus]:
        """Liveness and health of each component (nodes: their Ready condition)."""
        if not self.paths.ports_file.exists():
            return []
        ports, ctl = self.ports, insecure_ssl()
        admin = admin_ssl(self.pki) if self.pki.crt("admin").exists() else False
        urls = {
            "etcd": (f"http://127.0.0.1:{ports.etcd}/health", False),
            "kube-apiserver": (f"{ports.server}/readyz", admin),
            "kube-controller-manager": (
                f"https://127.0.0.1:{ports.controller_manager}/healthz",
                ctl,
            ),
            "kube-scheduler": (f"https://127.0.0.1:{ports.scheduler}/healthz", ctl),
        }
        result = []
        for name, (url, ctx) in urls.items():
            code, body = await probe(url, ssl_ctx=ctx)
            pid = self._tracked.pid(name)
            result.append(
                ComponentStatus(
                    name=name,
                    pid=pid,
                    healthy=code == 200,
                    detail="ok" if code == 200 else body if pid else "not running",
                )
            )
        for node in self.config.nodes:
            ready = await self.node_ready(node) if admin else "no credentials"
            result.append(
                ComponentStatus(
                    name=self.node_component(node),
                    pid=self._tracked.pid(self.node_component(node)),
                    healthy=ready == "True",
                    detail=f"Ready={ready}",
                )
            )
        return result

    async def start_node_agent(self, node: str) -> None:
        """Start the node's agent unless running; wait for its Node to be Ready."""
        name = f"nodeagent-{node}"
        if self._tracked.running(name) and await self.node_ready(node) == "True":
            return
        if not self._tracked.running(name):
            spawn_detached(components.node_agent(self.config, node), marker=self.marker)
        since = time.time() - 1
        await self._tracked.wait(name, lambda: self.node_ready(node, since=since))

    async def stop_node_agent(self, node: str, *, sig: signal.Signals = signal.SIGKILL) -> None:
        """Kill a node agent (SIGKILL by default: its pods keep running, as with a kubelet)."""
        pid = self._tracked.pid(f"nodeagent-{node}")
        if pid is not None and carries_marker(pid, self.marker):
            await stop_process(pid, marker=self.marker, grace=45, sig=sig)

    async def node_ready(self, node: str, *, since: float = 0.0) -> str:
        """The Node's Ready status ("True", "False", "Unknown", or why it is not known)."""
        url = f"{self.ports.server}/api/v1/nodes/{node}"
        code, body = await probe(url, ssl_ctx=admin_ssl(self.pki), limit=None)
        if code != 200:
            return f"HTTP {code}"
        for cond in json.loads(body).get("status", {}).get("conditions", []):
            if cond.get("type") == "Ready":
                beat = datetime.fromisoformat(cond["lastHeartbeatTime"]).timestamp()
                return str(cond["status"]) if beat >= since else "stale"
        return "no Ready condition"

    # -- internals ------------------------------------------------------------------

    def _check_binaries(self) -> None:
        needed = (*BINARIES, "kubelet", "kube-proxy") if self.real_nodes else BINARIES
        missing = [b for b in needed if not (self.config.bin_dir / b).is_file()]
        if missing:
            raise ComponentFailed(
                "control-plane build",
                f"missing {', '.join(missing)} in {self.config.bin_dir!s}; "
                "run scripts/build-control-plane (it prints the bin dir)",
            )
        containerd = self.config.containerd_bin
        if self.real_nodes and not (containerd / "containerd").is_file():
            raise ComponentFailed(
                "containerd build",
                f"no containerd in {containerd!s} ($KUBEVIRT_PY_CONTAINERD_BIN); "
                "run scripts/build-containerd (it prints the bin dir)",
            )

    def _write_kubeconfigs(self, ports: Ports) -> None:
        write_kubeconfig(self.kubeconfig, server=ports.server, pki=self.pki, user="admin")
        users = ["controller-manager", "scheduler", *(f"node-{n}" for n in self.config.nodes)]
        for user in users:
            write_kubeconfig(
                self.paths.kubeconfig(user), server=ports.server, pki=self.pki, user=user
            )

    async def _unmount_leftovers(self) -> None:
        for target in mounts_under([self.config.nodes_dir, self.paths.root]):
            log.warning("leftover_mount_unmounted", target=target)
            with contextlib.suppress(CommandFailed):
                await run_cmd(["umount", "-l", target], timeout=30)
