"""The launcher's start: a private libvirtd first, then its command socket (launcher.cmdsocket:
the handler connects and wires the pod meanwhile), then the rest of the launcher
(launcher.serve: the libvirt connection, the commands, domain events) imported while the
daemon starts in its own process.

This module imports only what starting libvirtd needs (the config, the daemon's paths, its
cgroup partition, the TCG wrapper): the model, the domain XML builder, libvirt-python and
the wire are most of the launcher's start-up CPU, and they load beside the daemon's start
instead of before it. A unit test keeps this module's imports light.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time

import structlog

from launcher import tcgthreads
from launcher.cgroups import Partition
from launcher.config import Config
from launcher.daemonpaths import DaemonPaths, choose_isolation
from launcher.libvirtd import LibvirtDaemon
from shared import podlayout
from shared.cgrouppartition import partition_name
from shared.daemon import stop_on_signals
from shared.podlayout import LAUNCHER_INIT_SOCKET, LAUNCHER_SOCKET

log = structlog.get_logger("launcher")


async def run(config: Config) -> None:
    """Serve one VM until SIGTERM (guest shut down within its grace) or Delete."""
    async with stop_on_signals(ignore_after=True) as stop:
        await _run(config, stop)


async def _run(config: Config, stop: asyncio.Event) -> None:
    config.sockets_dir.mkdir(parents=True, exist_ok=True)
    daemon = LibvirtDaemon(
        paths=DaemonPaths(
            root=config.private_dir / podlayout.LIBVIRT_ROOT, isolation=choose_isolation()
        ),
        libvirtd=config.libvirtd,
        tini=config.tini,
    )
    partition = Partition(partition_name(config.uid, os.getpid()))
    try:
        # A session daemon (non-root launcher) uses no cgroups of its own.
        cgroups = not daemon.paths.session and partition.create()
        wrapper = tcgthreads.write_wrapper(config.private_dir)
        daemon.prepare(
            capabilities_seed=config.capabilities_seed,
            cgroups=cgroups,
            derive=lambda cache: tcgthreads.seed_capabilities(cache, wrapper),
        )
        await daemon.spawn()
        from launcher.cmdsocket import command_socket, import_off_loop  # noqa: PLC0415

        async with command_socket(config.sockets_dir) as commands:
            await import_off_loop("launcher.serve")  # while libvirtd starts: see the docstring
            from launcher import serve  # noqa: PLC0415 (loaded by now)

            log.info("launcher_imported", cpu_s=round(time.process_time(), 3))
            await daemon.ready()
            await serve.serve(
                config,
                daemon=daemon,
                commands=commands,
                partition=partition.xml_path if cgroups else None,
                wrapper=wrapper,
                stop=stop,
            )
    finally:
        await daemon.stop()
        await partition.release()
        for name in (LAUNCHER_INIT_SOCKET, LAUNCHER_SOCKET):
            with contextlib.suppress(FileNotFoundError):
                (config.sockets_dir / name).unlink()
        log.info("launcher_stopped")
