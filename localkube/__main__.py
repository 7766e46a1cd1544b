"""CLI of the local cluster:
``python -m localkube up|down|status|kubeconfig|prometheus|registry``.

Normally run through ``scripts/cluster``, which builds the control plane first and
exports KUBEVIRT_PY_KUBE_BIN.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

import structlog

from localkube import projectregistry, registry
from localkube.cluster import Cluster
from localkube.config import ClusterConfig
from localkube.errors import LocalKubeError
from localkube.promconfig import PrometheusOptions
from localkube.prometheus import LocalPrometheus
from localkube.stopping import Interrupted, stop_signals


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="localkube", description=__doc__)
    parser.add_argument("--bin-dir", type=Path, help="control-plane binaries (default: env)")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the cluster (harmless when already up)")
    up.add_argument(
        "--peer",
        type=Path,
        metavar="STATE_DIR",
        help="then peer it with the real-node cluster kept in STATE_DIR "
        "(localkube/realnode/peering.py; `down` of either undoes it)",
    )
    down = sub.add_parser("down", help="stop everything; keep state unless --purge")
    down.add_argument("--purge", action="store_true", help="also delete etcd data, certs, pods")
    sub.add_parser("status", help="health of each component; exit 1 if any is unhealthy")
    sub.add_parser("kubeconfig", help="print the admin kubeconfig path")
    sub.add_parser("registry", help="print the private registry's host, image and credentials")
    prom = sub.add_parser("prometheus", help="start the local Prometheus; print its URL")
    prom.add_argument("--down", action="store_true", help="stop it instead")
    prom.add_argument("--scrape-interval", help="instead of the ServiceMonitor's (e.g. 5s)")
    prom.add_argument("--evaluation-interval", default="15s", help="rule evaluation interval")
    prom.add_argument("--for-cap", help="cap every alert's `for` (e.g. 30s), to see alerts fire")
    return parser.parse_args(argv)


async def _run(args: argparse.Namespace, cluster: Cluster) -> int:
    if args.command == "up":
        await cluster.up()
        if args.peer is not None:
            await _peer_cluster(cluster.config, args.peer).peer(cluster)
            print(f"peered with {args.peer}")
        print(f"export KUBECONFIG={cluster.kubeconfig}")
        print(f"kubectl: {cluster.config.bin_dir / 'kubectl'}")
    elif args.command == "down":
        await cluster.down(purge=args.purge)
    elif args.command == "status":
        statuses = await cluster.status()
        if not statuses:
            print("no cluster state in", cluster.paths.root)
            return 1
        for st in statuses:
            mark = "ok " if st.healthy else "BAD"
            print(f"{mark} {st.name:26} pid={st.pid or '-':<8} {st.detail.strip()[:100]}")
        return 0 if all(st.healthy for st in statuses) else 1
    elif args.command == "kubeconfig":
        print(cluster.kubeconfig)
    elif args.command == "registry":
        return _registry(cluster)
    elif args.command == "prometheus":
        return await _prometheus(cluster, args)
    return 0


def _peer_cluster(config: ClusterConfig, state_dir: Path) -> Cluster:
    """The real-node cluster kept in ``state_dir`` (its nodes: those it has kubeconfigs
    for), to peer with."""
    kubeconfigs = (state_dir / "kubeconfig").glob("node-*.kubeconfig")
    nodes = tuple(
        sorted(p.name.removeprefix("node-").removesuffix(".kubeconfig") for p in kubeconfigs)
    )
    if not nodes or not (state_dir / "net.json").exists():
        raise LocalKubeError(f"no real-node cluster in {state_dir} to peer with")
    return Cluster(config.replace(state_dir=state_dir, nodes=nodes))


def _registry(cluster: Cluster) -> int:
    """The private registry's endpoint as JSON (real nodes built with a registry only)."""
    if not cluster.real_nodes or not (cluster.paths.root / "registry").is_dir():
        print("no private registry in", cluster.paths.root, file=sys.stderr)
        return 1
    plan = cluster.fleet().plan
    ep = registry.endpoint(cluster.config, plan)
    shown = {"host": ep.host, "image": ep.image(), "username": ep.username,
             "password": ep.password, "ca": str(ep.ca_file),
             "project_images": f"{projectregistry.host(plan)} (anonymous, read-only)"}  # fmt: skip
    print(json.dumps(shown, indent=2))
    return 0


async def _prometheus(cluster: Cluster, args: argparse.Namespace) -> int:
    options = PrometheusOptions(
        scrape_interval=args.scrape_interval,
        evaluation_interval=args.evaluation_interval,
        for_cap=args.for_cap,
    )
    prom = LocalPrometheus(cluster, options)
    if args.down:
        await prom.down()
    else:
        print(await prom.up())
    return 0


def _stoppable(args: argparse.Namespace, cluster: Cluster) -> int:
    """Run the command; SIGTERM, SIGINT or SIGHUP during `up` tears down what it started
    (purging the state when `up` created it), and during `down` forces it (SIGKILL first)."""
    signals = stop_signals()
    signals.install()
    fresh = not (cluster.paths.root / "node-kind").exists()  # written by the first `up`
    with signals.on_force(cluster.kill_now):
        try:
            if args.command == "down":
                with signals.tearing_down():
                    return asyncio.run(_run(args, cluster))
            return asyncio.run(_run(args, cluster))
        except Interrupted as stop:
            if args.command == "up":
                print(f"localkube up {stop}: tearing down", file=sys.stderr)
                with signals.tearing_down():
                    asyncio.run(cluster.down(purge=fresh))
            return 128 + stop.signum


def main() -> None:
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    args = _parse(sys.argv[1:])
    cluster = Cluster(ClusterConfig.from_env(bin_dir=args.bin_dir))
    try:
        sys.exit(_stoppable(args, cluster))
    except LocalKubeError as e:
        print(f"localkube {args.command} failed: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
