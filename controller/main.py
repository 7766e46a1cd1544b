"""virt-controller-py: the cluster-wide controller daemon (`python -m controller`).

main() → uvloop.run(run(Config.from_args()))
run(): connect → Controller → one TaskGroup with the daemon and a signal watcher;
       SIGTERM/SIGINT raise Shutdown inside it, which `except*` filters out; the
       leader Lease is released on the way out and the client closed last.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import replace

import structlog
import uvloop

from controller.admission import AdmissionConfig, AdmissionServer
from controller.app import Controller
from controller.config import Config
from controller.errors import ConfigError
from controller.subresources import SubresourceConfig, SubresourceServer
from controller.subresources.errors import SetupError
from shared import logs
from shared.kube import ClientConfig, KubeClient, LeadershipLost, RateLimit, Registry
from shared.kube import ConfigError as KubeConfigError

log = structlog.get_logger("controller")

USER_AGENT = "virt-controller-py"


class Shutdown(Exception):
    """Raised inside the TaskGroup when a termination signal arrives."""


def main() -> None:
    """Console-script entry point."""
    try:
        config = Config.from_args()
    except ConfigError as e:
        print(f"virt-controller-py: {e}", file=sys.stderr)
        sys.exit(2)
    logs.configure(config.log_format, component="virt-controller")
    try:
        uvloop.run(run(config))
    except* LeadershipLost:
        log.error("leadership_lost_exiting")
        sys.exit(1)
    except* (KubeConfigError, SetupError, ConfigError) as group:
        print(f"virt-controller-py: {group.exceptions[0]}", file=sys.stderr)
        sys.exit(2)


async def run(config: Config) -> None:
    """Run until SIGTERM/SIGINT (returns) or until the Lease is lost (raises)."""
    registry = Registry()
    client_config = ClientConfig(
        kubeconfig=config.kubeconfig,
        rate_limit=RateLimit(qps=config.qps, burst=config.burst),
        user_agent=USER_AGENT,
        request_timeout=config.timing.request_timeout,
    )
    subresources = SubresourceConfig.from_env(os.environ)  # None: no serving cert mounted
    admission = AdmissionConfig.from_env(os.environ)  # likewise
    if admission is not None:  # validation refuses what TCG cannot run when guests may
        admission = replace(admission, emulation=config.template.use_emulation)
    client = await KubeClient.connect(client_config, registry=registry)
    async with client:
        controller = Controller(config, client, registry)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(_until_signalled(), name="signals")
                tg.create_task(controller.run(), name="controller")
                if subresources is not None:
                    # Every replica serves the subresource API; leadership gates only
                    # the reconcile loops.
                    server = SubresourceServer(subresources, client, registry)
                    tg.create_task(server.run(), name="subresources")
                if admission is not None:
                    # So does every replica serve the admission webhooks.
                    webhooks = AdmissionServer(
                        admission,
                        client,
                        registry,
                        eviction_strategy=config.migration.eviction_strategy,
                    )
                    tg.create_task(webhooks.run(), name="admission")
        except* Shutdown:
            log.info("controller_stopped")


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    log.info("shutdown_requested")
    raise Shutdown
