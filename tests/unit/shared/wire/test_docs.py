"""docs/wire-protocol.md says what the code does: methods, limits, error codes, info."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from launcher import commands
from shared.wire.client import RpcClient, Tier
from shared.wire.errors import ErrorCode
from shared.wire.limits import WIRE_LIMITS, Limits
from shared.wire.server import RpcServer, ServerInfo

DOC = (Path(__file__).resolve().parents[4] / "docs" / "wire-protocol.md").read_text()


def _section(title: str) -> str:
    start = DOC.index(f"## {title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end > 0 else None]


def _first_column(section: str) -> list[str]:
    """The backticked names in the first column of the section's table rows."""
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [name for row in rows for name in re.findall(r"`([^`]+)`", row.split("|")[1])]


def _launcher_server() -> RpcServer:
    server = RpcServer(info=ServerInfo(server="virt-launcher-py"))
    commands.register(server, cast(Any, object()), cast(Any, object()), cast(Any, object()))
    return server


def test_launcher_methods_are_the_documented_ones() -> None:
    """The launcher commands table lists exactly what the launcher's server registers."""
    assert sorted(_first_column(_section("Launcher commands"))) == sorted(
        _launcher_server().methods
    )


_UNITS = {"MiB": 1024 * 1024, "KiB": 1024, "s": 1}


def _value(text: str) -> float:
    number, _, unit = text.partition(" ")
    return float(number) * _UNITS.get(unit, 1)


def test_limits_table_matches_the_defaults() -> None:
    """Every limit is documented with its default value, and nothing else is."""
    rows = [line.split("|") for line in _section("Limits").splitlines() if line.startswith("| `")]
    documented = {row[1].strip(" `"): _value(row[2].strip()) for row in rows}
    fields = {f.name for f in dataclasses.fields(Limits) if f.init}
    assert set(documented) == fields
    defaults = Limits()
    assert documented == {name: float(getattr(defaults, name)) for name in fields}
    assert list(documented)[: len(WIRE_LIMITS)] == list(WIRE_LIMITS)  # "the first eight"


def test_every_error_code_is_documented() -> None:
    """Each code the protocol can send has a row in the error table."""
    documented = set(_first_column(_section("Error codes → client exceptions")))
    assert {str(code) for code in ErrorCode} <= documented


@pytest.mark.parametrize("name", WIRE_LIMITS)
def test_handshake_section_names_each_listed_limit(name: str) -> None:
    """The handshake section names every limit ``info`` lists."""
    assert name in _section("Version handshake")


@contextlib.asynccontextmanager
async def _client_of(server: RpcServer, sock: Path) -> AsyncIterator[RpcClient]:
    started = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(server.serve(sock, started=started))
        await started.wait()
        try:
            async with RpcClient.connect(sock) as client:
                yield client
        finally:
            task.cancel()


async def test_info_answers_as_documented(tmp_path: Path) -> None:
    """``info`` answers versions, server, methods (itself included) and the limits."""
    server = _launcher_server()
    async with _client_of(server, tmp_path / "sock") as client:
        info = await client.call("info", {}, tier=Tier.SHORT)
    assert set(info) == {"versions", "server", "methods", "limits"}
    assert info["methods"] == sorted(server.methods)
    assert "info" in info["methods"]
    assert list(info["limits"]) == list(WIRE_LIMITS)
