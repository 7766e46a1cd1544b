"""The test's view of its VMIs on the real API server: an informer over the test's
namespace keeping each VMI's latest object and the statuses written after a point the
test marks (its own handoff to the node), so tests can count the handler's writes."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from shared.kube import (
    VMIS,
    Handlers,
    Informer,
    InformerConfig,
    KubeClient,
    ListWatch,
    Selector,
    raw,
    wait_for_sync,
)

Obj = dict[str, Any]


class VMIView:
    """`latest[key]` and `history[key]` (distinct statuses after `record_after`)."""

    def __init__(self, kube: KubeClient, namespace: str) -> None:
        source = ListWatch(kube, VMIS, Selector(namespace=namespace))
        self._informer: Informer[Obj] = Informer(
            source, InformerConfig(name="test-vmis"), decode=raw
        )
        self._informer.add_handlers(
            Handlers(on_add=self._seen, on_update=lambda _, new: self._seen(new))
        )
        self.latest: dict[str, Obj] = {}
        self.history: dict[str, list[Obj]] = {}
        self._after: dict[str, int] = {}
        self._base: dict[str, Obj] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._informer.run(), name="test-vmi-view")
        await wait_for_sync(self._informer, timeout=30)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def record_after(self, handed: Obj) -> None:
        """Statuses of this VMI that differ from the one it has here, and are newer than
        this version of it, go into its history."""
        meta = handed["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        self._after[key] = int(meta["resourceVersion"])
        self._base[key] = handed.get("status") or {}
        self.history[key] = []

    def _seen(self, obj: Obj) -> None:
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        self.latest[key] = obj
        after = self._after.get(key)
        if after is None or int(meta["resourceVersion"]) <= after:
            return
        status = obj.get("status") or {}
        written = self.history.setdefault(key, [])
        if status != (written[-1] if written else self._base[key]):
            written.append(status)
