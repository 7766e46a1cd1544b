"""The test-bed CSI driver's processes (started by localkube.csi.stack):

    python -m localkube.csi controller --root DIR --endpoint SOCK
    python -m localkube.csi node --root DIR --node-id NODE [--kubelet-dir /var/lib/kubelet]
    python -m localkube.csi expander --endpoint SOCK --kubectl BIN --kubeconfig FILE

`node` runs inside the node's mount namespace: it serves CSI on
``<kubelet dir>/plugins/<driver>/csi.sock`` and registers itself with the kubelet through
``<kubelet dir>/plugins_registry/<driver>-reg.sock`` (no node-driver-registrar).
SIGTERM/SIGINT stop a process cleanly (its sockets removed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from pathlib import Path

import structlog

from localkube.csi.expander import Expander
from localkube.csi.node import NodeVolumes
from localkube.csi.rpc import serving
from localkube.csi.service import (
    DRIVER,
    controller_handler,
    identity_handler,
    node_handler,
    registration_handler,
)
from localkube.csi.store import Store
from shared.daemon import Shutdown, raise_on, stop_on_signals

log = structlog.get_logger()


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="localkube.csi", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    ctl = sub.add_parser("controller")
    ctl.add_argument("--root", type=Path, required=True)
    ctl.add_argument("--endpoint", type=Path, required=True)
    node = sub.add_parser("node")
    node.add_argument("--root", type=Path, required=True)
    node.add_argument("--node-id", required=True)
    node.add_argument("--kubelet-dir", type=Path, default=Path("/var/lib/kubelet"))
    exp = sub.add_parser("expander")
    exp.add_argument("--endpoint", type=Path, required=True)
    exp.add_argument("--kubectl", type=Path, required=True)
    exp.add_argument("--kubeconfig", type=Path, required=True)
    return parser.parse_args(argv)


async def _until_stopped() -> None:
    async with stop_on_signals() as stop:
        with contextlib.suppress(Shutdown):
            await raise_on(stop)


async def controller(args: argparse.Namespace) -> None:
    store = Store(args.root)
    store.ensure()
    async with serving(args.endpoint, identity_handler(controller=True), controller_handler(store)):
        await _until_stopped()


async def node(args: argparse.Namespace) -> None:
    store = Store(args.root)
    plugin_dir = args.kubelet_dir / "plugins" / DRIVER
    volumes = NodeVolumes(store=store, state_dir=plugin_dir / "published")
    endpoint = plugin_dir / "csi.sock"
    registration = args.kubelet_dir / "plugins_registry" / f"{DRIVER}-reg.sock"
    handlers = (identity_handler(controller=False), node_handler(volumes, node_id=args.node_id))
    async with (
        serving(endpoint, *handlers),
        serving(registration, registration_handler(endpoint=endpoint)),
    ):
        await _until_stopped()


async def expander(args: argparse.Namespace) -> None:
    loop = Expander(kubectl=args.kubectl, kubeconfig=args.kubeconfig, endpoint=args.endpoint)
    async with stop_on_signals() as stop:
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(loop.run())
                tg.create_task(raise_on(stop))
        except* Shutdown:
            pass


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    run = {"controller": controller, "node": node, "expander": expander}[args.command]
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
