"""virt-controller-py: the cluster-wide controller daemon (`python -m controller`).

main() → run(Config.from_args()) under shared.daemon's skeleton:
connect → Controller → one TaskGroup with the controller, virt-api's servers (every replica
serves them; leadership gates only the reconcile loops) and the signal watcher; SIGTERM/SIGINT
raise Shutdown, which `except*` filters out; the client is closed last. Losing the Lease
exits 1 (the Deployment restarts the replica as a standby).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os

import structlog

from controller.app import Controller
from controller.config import Config
from controller.errors import ConfigError
from shared import logs
from shared.daemon import Shutdown, parse_or_exit, raise_on, run_daemon, stop_on_signals
from shared.kube import ClientConfig, KubeClient, LeadershipLost, RateLimit, Registry
from shared.kube import ConfigError as KubeConfigError
from shared.memtrace import log_memory_on_signal
from virt_api.errors import ConfigError as ApiConfigError
from virt_api.serve import ServeOptions, servers
from virt_api.subresources.errors import SetupError

log = structlog.get_logger("controller")

NAME = "virt-controller-py"


def main() -> None:
    """Console-script entry point."""
    config = parse_or_exit(NAME, Config.from_args, ConfigError)
    logs.configure(config.log_format, component="virt-controller")
    codes = {LeadershipLost: 1, KubeConfigError: 2, SetupError: 2, ConfigError: 2}
    run_daemon(NAME, run(config), exit_codes={**codes, ApiConfigError: 2})


async def run(config: Config) -> None:
    """Run until SIGTERM/SIGINT (returns) or until the Lease is lost (raises)."""
    registry = Registry()
    client_config = ClientConfig(
        kubeconfig=config.kubeconfig,
        rate_limit=RateLimit(qps=config.qps, burst=config.burst),
        user_agent=NAME,
        request_timeout=config.timing.request_timeout,
    )
    options = ServeOptions(
        emulation=config.template.use_emulation,
        eviction_strategy=config.migration.eviction_strategy,
        client_config=client_config,
    )
    client = await KubeClient.connect(client_config, registry=registry)
    async with client, stop_on_signals() as stop:
        controller = Controller(config, client, registry)
        options = dataclasses.replace(options, cluster=controller.live.current)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(raise_on(stop), name="signals")
                tg.create_task(controller.run(), name="controller")
                tg.create_task(log_memory_on_signal(), name="memtrace")
                for name, server in servers(os.environ, client, registry, options=options):
                    tg.create_task(server, name=name)
        except* Shutdown:
            log.info("controller_stopped")
