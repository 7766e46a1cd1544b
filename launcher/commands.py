"""The launcher's command table: each wire method bound once to a manager operation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from launcher.guest import filesystems, guest_info, interfaces, users
from launcher.manager import DomainManager
from launcher.migration import Migrations
from shared.wire.domain import DomainStatus
from shared.wire.launcher_api import FreezeArgs, Method, NoArgs, SyncArgs
from shared.wire.migration import MigrateArgs
from shared.wire.server import RpcServer
from shared.wire.stats import DomainStats

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


def register(server: RpcServer, manager: DomainManager, migrations: Migrations) -> None:
    """Register every command of the tables against ``manager`` and ``migrations``."""
    for method, op in COMMANDS.items():

        async def handler(args: Mapping[str, Any], op: Op = op) -> Any:
            return await op(manager, args)

        server.register(str(method), handler)
    for method, mop in MIGRATION_COMMANDS.items():

        async def mhandler(args: Mapping[str, Any], mop: MigrationOp = mop) -> Any:
            return await mop(migrations, args)

        server.register(str(method), mhandler)
