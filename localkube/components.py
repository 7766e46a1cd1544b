"""Command lines of the control-plane components and node agents, all on loopback.

Flags follow envtest's apiserver defaults plus what a kubeadm cluster adds (RBAC +
Node authorization, NodeRestriction, the aggregation layer with front-proxy certs).
"""

from __future__ import annotations

import dataclasses
import json
import socket
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from localkube.config import ClusterConfig
from localkube.pki import SERVICE_CIDR, Pki
from localkube.procs import DaemonSpec

# The local cluster notices a dead node agent quickly (kubeadm's default is 40s).
NODE_MONITOR_GRACE = "20s"
NODE_MONITOR_PERIOD = "2s"
# PodTemplates bypass the watch cache so watches from a compacted resourceVersion reach
# etcd and get 410 Gone exactly as on a cluster whose cache window has moved on.
WATCH_CACHE_SIZES = "podtemplates#0"
# Process-mode nodes share the host's loopback: the apiserver stays there, and the Service
# range is virtual (no kube-proxy, nothing routes to it).
PROCESS_MODE_ADDRESSES = (
    "--bind-address=127.0.0.1",
    "--advertise-address=127.0.0.1",
    f"--service-cluster-ip-range={SERVICE_CIDR}",
    "--endpoint-reconciler-type=none",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ports:
    """Loopback ports of one cluster, picked once and kept in the state directory."""

    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int

    @classmethod
    def load_or_pick(cls, path: Path, *, repick_busy: bool = False) -> Ports:
        """The saved ports; new free ones if none are saved (or, with ``repick_busy``,
        if a saved one is now taken by something else)."""
        try:
            saved = cls(**json.loads(path.read_text()))
            if not repick_busy or saved.all_free():
                return saved
        except (OSError, ValueError, TypeError):
            pass
        names = [f.name for f in fields(cls)]
        ports = cls(**dict(zip(names, _free_ports(len(names)), strict=True)))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(ports), indent=2) + "\n")
        return ports

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver}"

    def all_free(self) -> bool:
        for port in asdict(self).values():
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Go listeners do
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    return False
        return True


def _free_ports(count: int) -> list[int]:
    """Ports free on every address (a wildcard bind: a bind to 127.0.0.1 may be handed a
    port another socket holds on one of the host's other addresses)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("0.0.0.0", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def etcd(config: ClusterConfig, ports: Ports) -> DaemonSpec:
    paths = config.paths
    client = f"http://127.0.0.1:{ports.etcd}"
    return DaemonSpec(
        name="etcd",
        argv=(
            str(config.bin_dir / "etcd"),
            "--name=localkube",
            f"--data-dir={paths.etcd_data}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls=http://127.0.0.1:{ports.etcd_peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{ports.etcd_peer}",
            f"--initial-cluster=localkube=http://127.0.0.1:{ports.etcd_peer}",
            "--unsafe-no-fsync=true",
            "--quota-backend-bytes=4294967296",
            "--log-level=warn",
        ),
        log_file=paths.log("etcd"),
        pidfile=paths.pidfile("etcd"),
    )


def apiserver(config: ClusterConfig, ports: Ports, *, extra: tuple[str, ...] = ()) -> DaemonSpec:
    """kube-apiserver; ``extra`` replaces the process-mode address and Service flags."""
    paths, pki = config.paths, Pki(config.paths.pki)
    return DaemonSpec(
        name="kube-apiserver",
        argv=(
            str(config.bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{ports.etcd}",
            f"--secure-port={ports.apiserver}",
            f"--tls-cert-file={pki.crt('apiserver')}",
            f"--tls-private-key-file={pki.key('apiserver')}",
            f"--client-ca-file={pki.crt('ca')}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
            *(extra or PROCESS_MODE_ADDRESSES),
            f"--watch-cache-sizes={WATCH_CACHE_SIZES}",
            f"--requestheader-client-ca-file={pki.crt('front-proxy-ca')}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki.crt('front-proxy-client')}",
            f"--proxy-client-key-file={pki.key('front-proxy-client')}",
            "--enable-aggregator-routing=true",
            "--profiling=false",
        ),
        log_file=paths.log("kube-apiserver"),
        pidfile=paths.pidfile("kube-apiserver"),
    )


def controller_manager(config: ClusterConfig, ports: Ports) -> DaemonSpec:
    paths, pki = config.paths, Pki(config.paths.pki)
    kubeconfig = paths.kubeconfig("controller-manager")
    return DaemonSpec(
        name="kube-controller-manager",
        argv=(
            str(config.bin_dir / "kube-controller-manager"),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.controller_manager}",
            "--leader-elect=false",
            "--controllers=*",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.crt('ca')}",
            "--use-service-account-credentials=true",
            f"--cluster-signing-cert-file={pki.crt('ca')}",
            f"--cluster-signing-key-file={pki.key('ca')}",
            f"--node-monitor-grace-period={NODE_MONITOR_GRACE}",
            f"--node-monitor-period={NODE_MONITOR_PERIOD}",
            "--profiling=false",
        ),
        log_file=paths.log("kube-controller-manager"),
        pidfile=paths.pidfile("kube-controller-manager"),
    )


def scheduler(config: ClusterConfig, ports: Ports) -> DaemonSpec:
    paths = config.paths
    kubeconfig = paths.kubeconfig("scheduler")
    return DaemonSpec(
        name="kube-scheduler",
        argv=(
            str(config.bin_dir / "kube-scheduler"),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.scheduler}",
            "--leader-elect=false",
            "--profiling=false",
        ),
        log_file=paths.log("kube-scheduler"),
        pidfile=paths.pidfile("kube-scheduler"),
    )


def node_agent(config: ClusterConfig, node: str) -> DaemonSpec:
    paths = config.paths
    return DaemonSpec(
        name=f"nodeagent-{node}",
        argv=(
            str(config.python),
            "-m",
            "localkube.nodeagent",
            f"--node={node}",
            f"--kubeconfig={paths.kubeconfig(f'node-{node}')}",
            f"--root={config.nodes_dir}",
            f"--python={config.python}",
            f"--repo={config.repo}",
        ),
        log_file=paths.log(f"nodeagent-{node}"),
        pidfile=paths.pidfile(f"nodeagent-{node}"),
        env={"PYTHONPATH": str(config.repo), "PYTHONUNBUFFERED": "1"},
    )


def supervised(config: ClusterConfig, spec: DaemonSpec) -> DaemonSpec:
    """`spec` run under localkube.supervise: restarted with backoff whenever it exits."""
    argv = (str(config.python), "-m", "localkube.supervise", "--", *spec.argv)
    env = {"PYTHONPATH": str(config.repo), **spec.env}
    return dataclasses.replace(spec, argv=argv, env=env)
