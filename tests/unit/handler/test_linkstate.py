"""The handler asks the launcher for a running VMI's interface links (handler/linkstate.py)."""

from __future__ import annotations

from typing import Any

from handler import linkstate
from shared.model import VirtualMachineInstance
from shared.wire.errors import CommandFailed, ErrorCode
from shared.wire.launcher_api import Method
from tests.unit.handler.fakes import AnsweringLauncher


def _vmi(
    *states: str | None, phase: str = "Running", status: dict[str, Any] | None = None
) -> VirtualMachineInstance:
    ifaces = [{"name": f"n{i}", "bridge": {}} | ({"state": s} if s else {})
              for i, s in enumerate(states)]  # fmt: skip
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "v"}, "spec": {"domain": {"devices": {"interfaces": ifaces}}},
        "status": {"phase": phase, **(status or {})},
    })  # fmt: skip


def test_wanted_only_for_a_running_vmi_naming_a_state() -> None:
    """Every interface's link (unset is up) once one names a state; nothing otherwise, nor
    before Running, nor while migrating."""
    got = linkstate.wanted(_vmi("down", None))
    assert got is not None and dict(got.links) == {"n0": False, "n1": True}
    assert linkstate.wanted(_vmi(None, None)) is None
    assert linkstate.wanted(_vmi("down", phase="Scheduled")) is None
    migrating = {"migrationState": {"targetNode": "node02"}}
    assert linkstate.wanted(_vmi("down", status=migrating)) is None


async def test_apply_sends_set_link_states_and_tolerates_an_old_launcher() -> None:
    """set_link_states carries the links; the reply names the changed interfaces; a
    launcher without the command is no error."""
    args = linkstate.wanted(_vmi("down"))
    assert args is not None
    launcher = AnsweringLauncher(answer=["n0"])
    assert await linkstate.apply(launcher, args) == ["n0"]  # type: ignore[arg-type]
    assert launcher.calls == [(Method.SET_LINK_STATES, {"links": {"n0": False}})]
    old = AnsweringLauncher(error=CommandFailed(ErrorCode.UNKNOWN_METHOD, "unknown method"))
    assert await linkstate.apply(old, args) == []  # type: ignore[arg-type]
