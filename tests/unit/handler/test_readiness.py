"""virt-handler's readiness (/readyz, the Ready condition of its pod): only once its caches
are synced and its actions endpoint serves (listening and published on its Node), so a
restarted handler is Ready exactly when pause/unpause and the other actions reach it."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from handler.actions import ActionsServer
from handler.daemon import Handler
from shared.kube import Registry
from tests.unit.handler.fakes import FakeApi
from tests.unit.handler.test_daemon import _config


def _handler(tmp_path: Path) -> Handler:
    config = dataclasses.replace(_config(tmp_path), device_plugins=None)
    return Handler(config, api=FakeApi(), registry=Registry())


def test_ready_only_once_synced_and_serving_actions(tmp_path: Path) -> None:
    """Synced but the actions endpoint not yet serving: not ready; serving: ready;
    stopping: not ready again."""
    handler = _handler(tmp_path)
    actions = SimpleNamespace(serving=False)
    handler.actions = cast(ActionsServer, actions)
    assert not handler.ready()
    handler._synced = True
    assert not handler.ready()
    actions.serving = True
    assert handler.ready()
    handler._stopping = True
    assert not handler.ready()


async def test_the_heartbeat_is_poked_once_the_actions_endpoint_serves(tmp_path: Path) -> None:
    """A restarted handler's first beats say unschedulable; the moment its actions
    endpoint is published the heartbeat is poked (no wait for the next 60 s beat)."""
    handler = _handler(tmp_path)
    pokes: list[bool] = []
    handler.heartbeat.poke = lambda: pokes.append(True)  # type: ignore[method-assign]
    actions = ActionsServer.__new__(ActionsServer)
    actions.started, actions.published = asyncio.Event(), asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(handler._poke_when_serving(actions))
        actions.started.set()
        await asyncio.sleep(0.01)
        assert pokes == []  # listening but not yet published: not serving
        actions.published.set()
        await asyncio.wait_for(task, 1)
    assert pokes == [True]
