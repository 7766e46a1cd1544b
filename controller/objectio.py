"""Reads and writes of the objects a controller makes for one of its own (an owner): each
bounded by a timeout, a create that already happened is not an error, a failed one is a
Warning event on the owner and a SyncError.

    io = ObjectIO(client, recorder, timeout=10.0)
    raw = await io.get(SECRETS, "name", "ns")          # None when absent
    await io.create(PODS, body, owner=vme, what="exporter pod")
    gone = await io.delete(PODS, "name", "ns")          # False when it was not there
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import structlog

from controller.errors import SyncError
from shared.kube import (
    AlreadyExists,
    ApiError,
    DeleteOptions,
    EventType,
    KubeClient,
    NotFound,
    Recorder,
    Resource,
    TransportError,
)
from shared.model import KubeObject

log = structlog.get_logger("controller.objectio")


class ObjectIO:
    """GET-or-None, create-once and delete-if-there, each within `timeout` seconds."""

    def __init__(self, client: KubeClient, recorder: Recorder, *, timeout: float) -> None:
        self._client = client
        self._recorder = recorder
        self._timeout = timeout

    async def get(self, resource: Resource, name: str, namespace: str) -> dict[str, Any] | None:
        try:
            async with asyncio.timeout(self._timeout):
                return await self._client.get(resource, name, namespace=namespace)
        except NotFound:
            return None

    async def create(
        self, resource: Resource, body: Mapping[str, Any], *, owner: KubeObject, what: str
    ) -> None:
        """Create `body` in the owner's namespace; events on the owner either way."""
        name = body["metadata"]["name"]
        try:
            async with asyncio.timeout(self._timeout):
                await self._client.create(resource, body, namespace=owner.namespace)
        except AlreadyExists:
            return
        except (ApiError, TransportError) as e:
            message = f"{what} {name}: {e}"
            self._recorder.event(owner, EventType.WARNING, "FailedCreate", message)
            raise SyncError("FailedCreate", message) from e
        log.info("object_created", what=what, name=name)
        self._recorder.event(owner, EventType.NORMAL, "Created", f"Created {what} {name}")

    async def delete(self, resource: Resource, name: str, namespace: str) -> bool:
        try:
            async with asyncio.timeout(self._timeout):
                await self._client.delete(
                    resource, name, namespace=namespace, options=DeleteOptions()
                )
        except NotFound:
            return False
        return True
