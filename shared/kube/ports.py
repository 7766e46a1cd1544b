"""Small typed slices of KubeClient, one per kind of call, written once.

A component asks for the calls it makes (`Gets`, `GetsPatches`, `ObjectWrites` …) instead
of the whole client, so unit tests hand it a small fake; KubeClient satisfies every one.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any, Protocol

from shared.kube.api_types import DeleteOptions, ListResult, PatchType
from shared.kube.resources import Resource


class Gets(Protocol):
    """Reads one object (each call under the client's timeout)."""

    async def get(
        self, resource: Resource, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]: ...


class Creates(Protocol):
    """Creates one object."""

    async def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]: ...


class Patches(Protocol):
    """Patches one object (merge patch unless told; a subresource such as status)."""

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | builtins.list[dict[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
    ) -> dict[str, Any]: ...


class Lists(Protocol):
    """Lists objects, by label if asked."""

    async def list(
        self, resource: Resource, *, namespace: str | None = None, label_selector: str | None = None
    ) -> ListResult: ...


class Deletes(Protocol):
    """Deletes one object."""

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        options: DeleteOptions | None = None,
    ) -> dict[str, Any]: ...


class GetsPatches(Gets, Patches, Protocol):
    """Reads and patches."""


class GetsCreatesPatches(Gets, Creates, Patches, Protocol):
    """Reads, creates and patches (revisions, hotplug requests)."""


class ObjectWrites(Gets, Creates, Patches, Lists, Deletes, Protocol):
    """Every per-object call a store makes."""
