"""virt-handler-py: the node agent that turns Scheduled VMIs into running guests.

python -m handler --node-name node01 [--kubeconfig K] [--pods-dir D] [--notify-socket S]
"""

from __future__ import annotations

import asyncio
import signal
import sys

import uvloop

from handler.api import KubeApi
from handler.config import Config
from handler.daemon import Handler
from handler.errors import StartupError
from shared import logs
from shared.kube import (
    HANDLER_RATE_LIMIT,
    ClientConfig,
    ConfigError,
    EventRecorder,
    KubeClient,
    RecorderConfig,
    Registry,
)


def main() -> None:
    try:
        config = Config.from_args()
    except StartupError as exc:
        print(f"virt-handler-py: {exc}", file=sys.stderr)
        sys.exit(2)
    logs.configure(config.log_format, node=config.node_name)
    try:
        uvloop.run(run(config))
    except ConfigError as exc:
        print(f"virt-handler-py: {exc}", file=sys.stderr)
        sys.exit(2)


async def run(config: Config) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    registry = Registry()
    client_config = ClientConfig(
        kubeconfig=config.kubeconfig,
        rate_limit=HANDLER_RATE_LIMIT,
        user_agent="virt-handler-py",
    )
    async with await KubeClient.connect(client_config, registry=registry) as client:
        recorder = EventRecorder(
            client,
            RecorderConfig(component="virt-handler", host=config.node_name),
            registry=registry,
        )
        handler = Handler(config, api=KubeApi(client), registry=registry, recorder=recorder)
        await handler.run(stop)


if __name__ == "__main__":
    main()
