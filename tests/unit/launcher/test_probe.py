"""virt-probe-py against a launcher command server: guestAgentPing passes when the agent
answers, exec passes on exit 0 and fails otherwise; the launcher's guest_exec polls
guest-exec-status until the command exits."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from launcher.guest import guest_exec
from launcher.manager import DomainManager
from launcher.probe import main, parse, probe
from shared.wire.errors import CommandFailed, ErrorCode, WireError
from shared.wire.launcher_api import GuestExecArgs, Method
from shared.wire.server import RpcServer, ServerInfo


async def _ping(_args: Mapping[str, Any]) -> bool:
    return True


async def _exec(args: Mapping[str, Any]) -> dict[str, int]:
    return {"exitCode": 0 if args["command"][0] == "true" else 1}


async def _no_agent(_args: Mapping[str, Any]) -> bool:
    raise CommandFailed(ErrorCode.AGENT_NOT_CONNECTED, "guest agent not connected")


async def served(tmp_path: Path, *, agent: bool = True) -> tuple[Path, asyncio.Task[None]]:
    server = RpcServer(info=ServerInfo(server="virt-launcher-py"))
    server.register(str(Method.GUEST_PING), _ping if agent else _no_agent)
    server.register(str(Method.GUEST_EXEC), _exec)
    sock = tmp_path / "launcher-sock"
    started = asyncio.Event()
    task = asyncio.create_task(server.serve(sock, started=started))
    await started.wait()
    return sock, task


@pytest.mark.parametrize(
    ("argv", "agent", "passes"),
    [
        pytest.param(["ping"], True, True, id="ping"),
        pytest.param(["ping"], False, False, id="no-agent"),
        pytest.param(["exec", "--", "true"], True, True, id="exec-0"),
        pytest.param(["exec", "--", "false"], True, False, id="exec-1"),
    ],
)
async def test_probe_outcomes(tmp_path: Path, argv: list[str], agent: bool, passes: bool) -> None:
    """None (pass) or why it failed, per what the launcher answers."""
    sock, task = await served(tmp_path, agent=agent)
    try:
        args = parse(["--socket", str(sock), *argv])
        try:
            why = await probe(args)
        except WireError as e:
            why = str(e)
        assert (why is None) is passes
    finally:
        task.cancel()


def test_a_missing_launcher_fails_the_probe(tmp_path: Path) -> None:
    """No socket: exit 1 (the kubelet counts a failure), not a traceback."""
    with pytest.raises(SystemExit) as done:
        main(["--socket", str(tmp_path / "none"), "ping"])
    assert done.value.code == 1


class Agent:
    """guest-exec starts pid 7; guest-exec-status says running once, then exited 3."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.polls = 0

    async def agent(self, command: str, arguments: Mapping[str, Any] | None = None) -> Any:
        self.calls.append((command, arguments))
        if command == "guest-exec":
            return {"pid": 7}
        self.polls += 1
        return {"exited": self.polls > 1, "exitcode": 3}


async def test_guest_exec_polls_until_the_command_exits() -> None:
    """The command's path and args go to guest-exec; its exit code comes back."""
    agent = Agent()
    args = GuestExecArgs(command=("cat", "/ok"), timeout_seconds=5)
    answer = await guest_exec(cast(DomainManager, agent), args)
    assert answer == {"exitCode": 3}
    assert agent.calls[0] == ("guest-exec", {"path": "cat", "arg": ["/ok"], "capture-output": True})
    assert agent.calls[-1] == ("guest-exec-status", {"pid": 7})
