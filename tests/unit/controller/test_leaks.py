"""Per-object state in the controller does not outlive its object: after VMIs (or VMs)
are created, run and deleted, every table the controller's object graph reaches is back
to its size before them (issue 27: the leading controller's RSS crept ~0.15 MiB/min in a
soak)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tests.unit.controller.churn import ControllerRig, WatchedApi
from tests.unit.leakcheck import grown, sizes

CYCLES = 5

Lifecycle = Callable[[ControllerRig], Callable[[str, str], Awaitable[None]]]


def _uid(i: int) -> str:
    return f"0b6c1d7e-aaaa-bbbb-cccc-{i:012d}"


@pytest.mark.parametrize(
    "lifecycle",
    [
        pytest.param(lambda rig: rig.vmi_lifecycle, id="vmi-created-running-deleted"),
        pytest.param(lambda rig: rig.vm_lifecycle, id="vm-started-halted-deleted"),
    ],
)
async def test_churn_leaves_no_per_object_state(lifecycle: Lifecycle) -> None:
    """A warm-up object, then five more through their whole life: no queue, backoff,
    expectation, remembered write, event table, metric family or cache holds more."""
    rig = ControllerRig()
    run = lifecycle(rig)
    await run("warm", _uid(0))
    before = sizes(rig.ctl, skip=(WatchedApi,))
    for i in range(1, CYCLES + 1):
        await run(f"obj{i}", _uid(i))
    assert grown(before, sizes(rig.ctl, skip=(WatchedApi,))) == {}
