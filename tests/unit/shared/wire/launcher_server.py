"""The launcher's command server with a fake libvirt behind it, run as its own process.

`python -m tests.unit.shared.wire.launcher_server <socket> <work-dir>` serves the real command
table (launcher.commands) through the real RpcServer on uvloop, as `python -m launcher`
does, with the unit tests' FakeVirt in place of libvirt, until SIGTERM. The fuzz test
measures this process's memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import cast

import uvloop

from launcher import commands
from launcher.disks import DiskContext
from launcher.hotplug import Hotplug, HotplugConfig, HotplugVirt
from launcher.manager import DomainManager, Identity
from launcher.migration import EndpointConfig, MigrationPort, Migrations, SourceMigrator
from launcher.plan import HostPaths
from shared.wire.domain import DomainState
from shared.wire.server import RpcServer, ServerInfo
from tests.unit.launcher.test_manager import UID, FakeVirt


def build_server(work: Path) -> RpcServer:
    """An RpcServer with the launcher's commands over a running fake domain."""
    virt = FakeVirt()
    virt.current = DomainState.RUNNING
    identity = Identity(namespace="default", name="tiny", uid=UID)
    manager = DomainManager(
        virt=virt,
        identity=identity,
        disks=DiskContext(
            work_dir=work / "w", container_disks=work / "cd", vmi_disks=work / "vmi-disks"
        ),
        host=HostPaths(
            serial_log=work / "serial.log",
            console_socket=work / "c.sock",
            agent_socket=work / "a.sock",
            partition=None,
        ),
        virt_type="qemu",
        publish=lambda _event: None,
    )
    source = SourceMigrator(
        virt=cast(MigrationPort, virt), domain=identity.domain, publish=manager.set_migration
    )
    migrations = Migrations(
        manager=manager,
        source=source,
        endpoint=EndpointConfig(libvirt_root=work / "libvirt", short_id="fuzz"),
    )
    server = RpcServer(info=ServerInfo(server="virt-launcher-py"))
    hotplug = Hotplug(
        virt=cast(HotplugVirt, virt), domain=lambda: identity.domain, config=HotplugConfig()
    )
    commands.register(server, manager, migrations, hotplug)
    return server


async def serve(socket: Path, work: Path) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    server = build_server(work)
    async with asyncio.TaskGroup() as tg:
        serving = tg.create_task(server.serve(socket))
        await stop.wait()
        serving.cancel()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        uvloop.run(serve(Path(sys.argv[1]), Path(sys.argv[2])))
