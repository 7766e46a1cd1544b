"""virt-handler-py: the node agent that turns Scheduled VMIs into running guests.

python -m handler --node-name node01 [--kubeconfig K] [--pods-dir D] [--notify-socket S]
"""

from __future__ import annotations

import asyncio

from handler.api import KubeApi
from handler.config import Config
from handler.daemon import Handler
from handler.errors import StartupError
from shared import logs
from shared.daemon import parse_or_exit, run_daemon, stop_on_signals
from shared.kube import (
    HANDLER_RATE_LIMIT,
    ClientConfig,
    ConfigError,
    EventRecorder,
    KubeClient,
    RecorderConfig,
    Registry,
)
from shared.memtrace import log_memory_on_signal

NAME = "virt-handler-py"


def main() -> None:
    config = parse_or_exit(NAME, Config.from_args, StartupError)
    logs.configure(config.log_format, node=config.node_name)
    run_daemon(NAME, run(config), exit_codes={ConfigError: 2, StartupError: 2})


async def run(config: Config) -> None:
    registry = Registry()
    client_config = ClientConfig(
        kubeconfig=config.kubeconfig, rate_limit=HANDLER_RATE_LIMIT, user_agent=NAME
    )
    client = await KubeClient.connect(client_config, registry=registry)
    async with stop_on_signals() as stop, client:
        recorder = EventRecorder(
            client,
            RecorderConfig(component="virt-handler", host=config.node_name),
            registry=registry,
        )
        handler = Handler(config, api=KubeApi(client), registry=registry, recorder=recorder)
        async with asyncio.TaskGroup() as tg:
            memtrace = tg.create_task(log_memory_on_signal(), name="memtrace")
            await handler.run(stop)
            memtrace.cancel()


if __name__ == "__main__":
    main()
