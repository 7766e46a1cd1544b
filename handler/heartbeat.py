"""The node heartbeat: `kubevirt.io/schedulable` and `kubevirt.io/heartbeat` on our Node.

The controller's launcher pods select nodes labelled schedulable=true, and its node
controller treats a heartbeat older than its timeout as a dead handler. So the handler
says false while it starts (before its caches and devices are ready) and when it shuts
down, and otherwise renews both on an interval with jitter (so a fleet of handlers does
not beat in lockstep); a readiness change is published at once.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import structlog

from shared.kube import KubeError
from shared.labels import HEARTBEAT_ANNOTATION, SCHEDULABLE_LABEL
from shared.model import Clock, format_time, utc_now
from shared.tasks import cancelling

log = structlog.get_logger("handler.heartbeat")


class NodePatcher(Protocol):
    async def patch_node(self, name: str, patch: Mapping[str, Any]) -> None: ...


class Heartbeat:
    """Publishes the node's schedulability and liveness."""

    def __init__(
        self,
        api: NodePatcher,
        *,
        node: str,
        interval: float,
        jitter: float,
        schedulable: Callable[[], bool],
        wall: Clock = utc_now,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._api = api
        self._node = node
        self._interval = interval
        self._jitter = jitter
        self._schedulable = schedulable
        self._wall = wall
        self._rand = rand
        self._poke = asyncio.Event()
        self.beats = 0
        self.last: bool | None = None

    async def beat(self, *, schedulable: bool) -> None:
        """Patch the label and annotation once (the client's timeout applies)."""
        patch = {
            "metadata": {
                "labels": {SCHEDULABLE_LABEL: "true" if schedulable else "false"},
                "annotations": {HEARTBEAT_ANNOTATION: format_time(self._wall())},
            }
        }
        await self._api.patch_node(self._node, patch)
        if self.last is not schedulable:
            log.info("node_schedulable", schedulable=schedulable)
        self.last = schedulable
        self.beats += 1

    def poke(self) -> None:
        """Readiness changed: beat now rather than at the next interval."""
        self._poke.set()

    def next_delay(self) -> float:
        spread = self._jitter * (2.0 * self._rand() - 1.0)
        return max(0.1, self._interval * (1.0 + spread))

    async def run(self) -> None:
        """Beat forever; a failed beat is logged and retried at the next one."""
        while True:
            self._poke.clear()
            try:
                await self.beat(schedulable=self._schedulable())
            except KubeError as exc:
                log.warning("heartbeat_failed", error=str(exc))
            await self._until_due(asyncio.get_running_loop().time() + self.next_delay())

    async def _until_due(self, deadline: float) -> None:
        """Until the next beat is due: the interval ends or somebody pokes (a readiness
        change: the daemon pokes once its actions endpoint is published)."""
        left = deadline - asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(max(0.0, left)):
                await self._poke.wait()
        except TimeoutError:
            if cancelling():
                raise
