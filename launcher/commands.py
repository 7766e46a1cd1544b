"""The launcher's command table: each wire method bound once to a manager operation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from launcher.errors import CommandError
from launcher.guest import filesystems, guest_exec, guest_info, interfaces, users
from launcher.hotplug import Hotplug
from launcher.manager import DomainManager
from launcher.memorydump import MemoryDumps
from launcher.migration import Migrations
from launcher.portforward import PortForwards
from shared.wire.domain import DomainStatus
from shared.wire.launcher_api import (
    AttachVolumeArgs,
    DetachVolumeArgs,
    ForwardPortArgs,
    FreezeArgs,
    GuestExecArgs,
    Method,
    NoArgs,
    SyncArgs,
)
from shared.wire.memorydump import MemoryDumpArgs
from shared.wire.migration import MigrateArgs
from shared.wire.server import RpcServer
from shared.wire.stats import DomainStats

log = structlog.get_logger("launcher.commands")

Op = Callable[[DomainManager, Mapping[str, Any]], Awaitable[Any]]


def _no_args(action: Callable[[DomainManager], Awaitable[Any]]) -> Op:
    async def op(manager: DomainManager, args: Mapping[str, Any]) -> Any:
        NoArgs.from_wire(args)
        return _wire(await action(manager))

    return op


async def _sync(manager: DomainManager, args: Mapping[str, Any]) -> Any:
    return (await manager.sync(SyncArgs.from_wire(args).vmi)).to_wire()


async def _ping(_manager: DomainManager) -> str:
    return "pong"


def _wire(value: Any) -> Any:
    if isinstance(value, DomainStatus | DomainStats):
        return value.to_wire()
    return value


async def _guest_ping(manager: DomainManager) -> bool:
    await manager.agent("guest-ping")
    return True


async def _guest_exec(manager: DomainManager, args: Mapping[str, Any]) -> dict[str, int]:
    return await guest_exec(manager, GuestExecArgs.from_wire(args))


async def _freeze(manager: DomainManager, args: Mapping[str, Any]) -> None:
    await manager.freezer.freeze(FreezeArgs.from_wire(args).unfreeze_timeout_seconds)


async def _unfreeze(manager: DomainManager) -> None:
    await manager.freezer.thaw()


COMMANDS: Mapping[Method, Op] = {
    Method.PING: _no_args(_ping),
    Method.SYNC: _sync,
    Method.PAUSE: _no_args(DomainManager.pause),
    Method.UNPAUSE: _no_args(DomainManager.unpause),
    Method.SHUTDOWN: _no_args(DomainManager.shutdown),
    Method.KILL: _no_args(DomainManager.kill),
    Method.DELETE: _no_args(DomainManager.delete),
    Method.SOFT_REBOOT: _no_args(DomainManager.soft_reboot),
    Method.GET_DOMAIN: _no_args(DomainManager.status),
    Method.GET_DOMAIN_STATS: _no_args(DomainManager.stats),
    Method.GUEST_PING: _no_args(_guest_ping),
    Method.GUEST_EXEC: _guest_exec,
    Method.GET_GUEST_INFO: _no_args(guest_info),
    Method.GET_USERS: _no_args(users),
    Method.GET_FILESYSTEMS: _no_args(filesystems),
    Method.GET_INTERFACES: _no_args(interfaces),
    Method.FREEZE: _freeze,
    Method.UNFREEZE: _no_args(_unfreeze),
    Method.RESET: _no_args(DomainManager.reset),
}


MigrationOp = Callable[[Migrations, Mapping[str, Any]], Awaitable[Any]]


async def _prepare_target(migrations: Migrations, args: Mapping[str, Any]) -> Any:
    return (await migrations.prepare_target(SyncArgs.from_wire(args).vmi)).to_wire()


async def _migrate(migrations: Migrations, args: Mapping[str, Any]) -> Any:
    return migrations.migrate(MigrateArgs.from_wire(args)).to_wire()


async def _cancel(migrations: Migrations, args: Mapping[str, Any]) -> Any:
    NoArgs.from_wire(args)
    return (await migrations.cancel()).to_wire()


MIGRATION_COMMANDS: Mapping[Method, MigrationOp] = {
    Method.PREPARE_MIGRATION_TARGET: _prepare_target,
    Method.MIGRATE: _migrate,
    Method.CANCEL_MIGRATION: _cancel,
}


HotplugOp = Callable[[Hotplug, Mapping[str, Any]], Awaitable[Any]]


async def _attach(hotplug: Hotplug, args: Mapping[str, Any]) -> Any:
    return (await hotplug.attach(AttachVolumeArgs.from_wire(args))).to_wire()


async def _detach(hotplug: Hotplug, args: Mapping[str, Any]) -> Any:
    return (await hotplug.detach(DetachVolumeArgs.from_wire(args))).to_wire()


HOTPLUG_COMMANDS: Mapping[Method, HotplugOp] = {
    Method.ATTACH_VOLUME: _attach,
    Method.DETACH_VOLUME: _detach,
}


def register(
    server: RpcServer,
    manager: DomainManager,
    migrations: Migrations,
    hotplug: Hotplug,
    *,
    forwards: PortForwards | None = None,
    dumps: MemoryDumps | None = None,
) -> None:
    """Register every command of the tables against ``manager``, ``migrations`` and
    ``hotplug``; with ``forwards``, ForwardPort too, and each Sync applies the listed
    forwards; with ``dumps``, MemoryDump. The commands no start needs (disk expansion,
    resource and NIC hotplug, link states, backups) are launcher.ondemand's."""
    for method, op in COMMANDS.items():
        if forwards is not None and method is Method.SYNC:
            continue  # registered with the forwards below

        async def handler(args: Mapping[str, Any], op: Op = op) -> Any:
            return await op(manager, args)

        server.register(str(method), handler)
    if forwards is not None:
        _register_forwards(server, manager, forwards)
    for method, mop in MIGRATION_COMMANDS.items():

        async def mhandler(args: Mapping[str, Any], mop: MigrationOp = mop) -> Any:
            return await mop(migrations, args)

        server.register(str(method), mhandler)
    for method, hop in HOTPLUG_COMMANDS.items():

        async def hhandler(args: Mapping[str, Any], hop: HotplugOp = hop) -> Any:
            return await hop(hotplug, args)

        server.register(str(method), hhandler)
    if dumps is not None:
        _register_dumps(server, dumps)


def _register_dumps(server: RpcServer, dumps: MemoryDumps) -> None:
    async def memory_dump(args: Mapping[str, Any]) -> Any:
        return dumps.request(MemoryDumpArgs.from_wire(args)).to_wire()

    server.register(str(Method.MEMORY_DUMP), memory_dump)


def _register_forwards(server: RpcServer, manager: DomainManager, forwards: PortForwards) -> None:
    async def forward_port(args: Mapping[str, Any]) -> Any:
        return await forwards.forward(ForwardPortArgs.from_wire(args))

    async def sync(args: Mapping[str, Any]) -> Any:
        status = await _sync(manager, args)
        try:
            await forwards.apply_listed()
        except CommandError as e:  # the guest runs; a port that cannot be bound is logged
            log.warning("listed_port_forward_failed", error=str(e))
        return status

    server.register(str(Method.FORWARD_PORT), forward_port)
    server.register(str(Method.SYNC), sync)
