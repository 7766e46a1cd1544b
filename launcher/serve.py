"""The launcher's object graph once its libvirtd is starting: the libvirt connection, the
commands on the command socket launcher.app already serves (launcher.cmdsocket), domain
events pushed to the handler, and on SIGTERM the guest shut down (ACPI, then destroy after
the grace period) before the group ends.

launcher.app imports this module only after it has started libvirtd, so these imports (the
model, the domain XML builder, libvirt-python, the wire) cost no time before the daemon runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from pathlib import Path

import structlog

from launcher import cmdsocket
from launcher import commands as launcher_commands
from launcher import podnet as launcher_podnet
from launcher.cmdsocket import CommandSocket
from launcher.config import Config, VirtType
from launcher.daemonpaths import DaemonPaths
from launcher.disks import DiskContext
from launcher.errors import DaemonDied
from launcher.hotplug import Hotplug, HotplugConfig
from launcher.libvirtd import LibvirtDaemon
from launcher.manager import DomainManager, Identity
from launcher.memorydump import MemoryDumpConfig, MemoryDumps
from launcher.migration import EndpointConfig, Migrations, SourceMigrator
from launcher.migration_endpoint import LINK_ROOT
from launcher.notifier import Notifier
from launcher.ondemand import OnDemandCommands
from launcher.plan import HostPaths
from launcher.portforward import PortForwards
from launcher.virt import Virt
from shared import podlayout, podnet
from shared.daemon import Shutdown

log = structlog.get_logger("launcher")


def virt_type_of(config: Config) -> str:
    """kvm only when asked, or when scripts/probe-kvm saw a guest boot with it.

    The probe's cache file ends with its verdict ("kvm" or "tcg") on the last line.
    """
    if config.virt_type != VirtType.AUTO:
        return str(config.virt_type)
    probe = config.kvm_probe_file
    if probe is None or not probe.is_file():
        return "qemu"
    lines = probe.read_text().split()
    return "kvm" if lines and lines[-1] == "kvm" else "qemu"


async def serve(
    config: Config,
    *,
    daemon: LibvirtDaemon,
    commands: CommandSocket,
    partition: str | None,
    wrapper: Path | None,
    stop: asyncio.Event,
) -> None:
    """Connect to the started daemon and serve the VM until SIGTERM or Delete."""
    virt = await Virt.open(daemon.paths.uri)
    await virt.warm_up()
    if config.capabilities_seed is not None:
        log.info("qemu_capabilities", reused=daemon.capabilities_reused())
        daemon.save_capabilities(config.capabilities_seed)
    host = dataclasses.replace(
        _host_paths(daemon, partition, config.private_dir),
        node_name=config.node_name,
        tcg_single_emulator=wrapper,
    )
    try:
        await _serve(config, daemon=daemon, commands=commands, virt=virt, host=host, stop=stop)
    finally:
        await virt.close()


def _host_paths(daemon: LibvirtDaemon, partition: str | None, private_dir: Path) -> HostPaths:
    """Where QEMU puts the guest's serial log and binds its console and agent sockets (the
    handler finds them under the private dir), and the cgroup partition, if any."""
    qemu_dir = daemon.paths.guest_dir_for_qemu
    return HostPaths(
        serial_log=daemon.paths.serial_log,
        console_socket=qemu_dir / podlayout.CONSOLE_SOCKET_NAME,
        agent_socket=qemu_dir / podlayout.AGENT_SOCKET_NAME,
        vnc_socket=qemu_dir / podlayout.VNC_SOCKET_NAME,
        partition=partition,
        network_file=private_dir / podnet.NETWORK_FILE,
        swtpm_storage=daemon.paths.swtpm_storage,
    )


def _endpoint_config(config: Config, paths: DaemonPaths) -> EndpointConfig:
    """Where a migration target publishes itself; a non-root launcher may not write the
    node-wide link dir (only a one-host migration without the handlers' proxy uses it)."""
    return EndpointConfig(
        libvirt_root=paths.root,
        short_id=f"{config.uid.replace('-', '')[:8]}-{os.getpid()}",
        link_root=config.private_dir / "mig-links" if paths.session else LINK_ROOT,
        session=paths.session,
    )


async def _serve(
    config: Config,
    *,
    daemon: LibvirtDaemon,
    commands: CommandSocket,
    virt: Virt,
    host: HostPaths,
    stop: asyncio.Event,
) -> None:
    notifier = Notifier(config.notify_socket)
    manager = _manager(config, virt=virt, host=host, notifier=notifier)
    migrations = _migrations(config, daemon=daemon, virt=virt, manager=manager)
    server = commands.server
    hotplug = Hotplug(virt=virt, domain=lambda: manager.identity.domain, config=HotplugConfig())
    network_file = config.private_dir / podnet.NETWORK_FILE
    forwards = PortForwards(
        monitor=virt,
        domain=config.domain_name,
        vmi=lambda: manager.vmi,
        wired=lambda: launcher_podnet.masquerade_wired(network_file),
    )
    dumps = MemoryDumps(
        virt=virt, domain=lambda: manager.identity.domain, config=MemoryDumpConfig()
    )
    launcher_commands.register(server, manager, migrations, hotplug, forwards=forwards, dumps=dumps)
    OnDemandCommands(
        virt=virt, domain=lambda: manager.identity.domain, network_file=network_file
    ).register(server)
    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(cmdsocket.watch(commands.serving), name="command-server")
            tg.create_task(manager.watch_events(), name="domain-events")
            tg.create_task(notifier.run(), name="notifier")
            tg.create_task(_watch_daemon(daemon), name="libvirtd-watch")
            tg.create_task(_relay(manager.deleted, stop), name="delete-watch")
            tg.create_task(migrations.source.run(), name="migrations")
            tg.create_task(manager.freezer.run(), name="auto-thaw")
            tg.create_task(manager.credentials.run(), name="access-credentials")
            tg.create_task(dumps.run(), name="memory-dumps")
            extras = launcher_podnet.vmi_extras(lambda: manager.vmi)
            dhcp = launcher_podnet.serve(network_file, hostname=config.name, extras=extras)
            tg.create_task(dhcp, name="dhcp")
            commands.open_commands()
            await _until_stopped(manager, stop=stop, grace=config.grace_period_seconds)
    except* Shutdown:
        pass
    finally:
        migrations.close()


def _manager(config: Config, *, virt: Virt, host: HostPaths, notifier: Notifier) -> DomainManager:
    """The domain manager of this pod's VMI (its disks' work dir made)."""
    work_dir = config.private_dir / "disks"
    work_dir.mkdir(parents=True, exist_ok=True)
    return DomainManager(
        virt=virt,
        identity=Identity(namespace=config.namespace, name=config.name, uid=config.uid),
        disks=DiskContext(
            work_dir=work_dir,
            container_disks=config.container_disks_dir,
            vmi_disks=config.vmi_disks_dir,
            claim_capacities=config.claim_capacities,
        ),
        host=host,
        virt_type=virt_type_of(config),
        publish=notifier.publish,
    )


def _migrations(
    config: Config, *, daemon: LibvirtDaemon, virt: Virt, manager: DomainManager
) -> Migrations:
    """Both migration roles of this launcher: the source's migrator, the target's endpoint."""
    return Migrations(
        manager=manager,
        source=SourceMigrator(
            virt=virt,
            domain=config.domain_name,
            publish=manager.set_migration,
            shared_disks=lambda: manager.shared_disks,
            session=daemon.paths.session,
        ),
        endpoint=_endpoint_config(config, daemon.paths),
    )


async def _relay(source: asyncio.Event, target: asyncio.Event) -> None:
    await source.wait()
    target.set()


async def _until_stopped(manager: DomainManager, *, stop: asyncio.Event, grace: float) -> None:
    """Wait for SIGTERM (or Delete), shut the guest down within grace, then end the group."""
    await stop.wait()
    if not manager.deleted.is_set():
        log.info("sigterm_received", grace=grace)
        await manager.graceful_stop(grace=grace, clock=time.monotonic)
    raise Shutdown


async def _watch_daemon(daemon: LibvirtDaemon) -> None:
    code = await daemon.wait()
    raise DaemonDied(f"libvirtd exited with code {code}; see {daemon.paths.log}")
