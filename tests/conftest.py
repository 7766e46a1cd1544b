"""Suite-wide fixtures: every test fails if it leaves asyncio tasks running."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from localkube.stopping import stop_signals

STRAGGLER_GRACE = 2.0

# One local cluster of each kind per test session, shared by every package that asks for it
# (a fixture imported into a module instead would be a second session instance).
pytest_plugins = ["tests.integration.cluster.fixtures", "tests.integration.realnodes.fixtures"]


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM and SIGHUP end a session as Ctrl-C does: fixtures tear down what they
    started (clusters, daemons, guests); a second signal forces it (localkube.stopping)."""
    stop_signals().install()


@pytest.fixture(autouse=True)
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail the test if tasks it started are still alive once it returns. A task that is
    ending by itself gets up to STRAGGLER_GRACE seconds (grpc.aio finishes a call's tasks
    a moment after its server stopped)."""
    before = asyncio.all_tasks()
    yield
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STRAGGLER_GRACE
    while True:
        await asyncio.sleep(0)
        leaked = [
            t
            for t in asyncio.all_tasks() - before
            if not t.done() and t is not asyncio.current_task()
        ]
        if not leaked or loop.time() >= deadline:
            break
        await asyncio.sleep(0.05)
    if leaked:
        for task in leaked:
            task.cancel()
        await asyncio.gather(*leaked, return_exceptions=True)
        pytest.fail(f"test leaked {len(leaked)} task(s): {[t.get_name() for t in leaked]}")
