"""The commands no start needs (launcher.ondemand): registered at start, their groups and
modules loaded on the first of them, once."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

from launcher import commands
from launcher.ondemand import METHODS, OPS_MODULE, OnDemandCommands
from launcher.ondemand_ops import OPS
from shared.wire.launcher_api import Method
from shared.wire.links import LinkStatesArgs
from shared.wire.server import RpcServer, ServerInfo
from tests.unit.launcher.test_linkstate import _Virt


def test_the_table_serves_exactly_the_on_demand_methods() -> None:
    """launcher.ondemand_ops has one handler per method of METHODS, and none of those is
    also one of launcher.commands' tables (a method is registered once)."""
    assert set(OPS) == set(METHODS)
    assert len(METHODS) == len(set(METHODS))
    eager = {*commands.COMMANDS, *commands.MIGRATION_COMMANDS, *commands.HOTPLUG_COMMANDS}
    assert not eager & set(METHODS)
    assert Method.MEMORY_DUMP not in METHODS and Method.FORWARD_PORT not in METHODS


def test_the_launcher_start_loads_no_on_demand_module() -> None:
    """Importing launcher.serve (everything a Sync needs) loads neither the on-demand
    table nor the groups' modules."""
    heavy = (
        OPS_MODULE, "launcher.backup", "launcher.expand", "launcher.resources",
        "launcher.nichotplug", "launcher.linkstate",
    )  # fmt: skip
    code = (
        "import sys\nimport launcher.serve\n"
        f"print('LOADED', [m for m in {heavy!r} if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "LOADED []" in out, out


async def test_methods_are_listed_at_start_and_groups_built_once(tmp_path: Path) -> None:
    """register() lists every on-demand method on the server; two first calls racing
    share one set of groups, and a call reaches its group (a link set up)."""
    virt = _Virt()
    ondemand = OnDemandCommands(
        virt=cast(Any, virt), domain=lambda: "ns_v", network_file=tmp_path / "network"
    )
    server = RpcServer(info=ServerInfo(server="virt-launcher-py"))
    ondemand.register(server)
    assert set(server.methods) - {"info"} == {str(m) for m in METHODS}
    first, second = await asyncio.gather(ondemand.groups(), ondemand.groups())
    assert first is second is await ondemand.groups()
    args = LinkStatesArgs(links={"default": True}).to_wire()
    assert await ondemand.call(Method.SET_LINK_STATES, args) == ["default"]
    assert len(virt.updates) == 1
