"""What the fleet controllers (replica sets, pools) share about the objects they own:
finding an object's owner key by its controller reference, and deleting owned objects
with expectations lowered at once when a delete is refused or finds nothing."""

from __future__ import annotations

import asyncio
from typing import Protocol

import structlog

from shared.kube import (
    ApiError,
    Conflict,
    DeleteOptions,
    EventType,
    Expectations,
    KubeClient,
    NotFound,
    Recorder,
    Resource,
    TransportError,
)
from shared.model import KubeObject

log = structlog.get_logger("controller.owned")

WRITE_TIMEOUT = 30.0


class _Owners(Protocol):
    def get(self, key: str) -> KubeObject | None: ...


def owner_key(obj: KubeObject, *, kind: str, owners: _Owners) -> str | None:
    """The "namespace/name" key of the `kind` object controlling `obj`, when it exists
    in `owners` with the UID the reference names."""
    ref = obj.metadata.controller_ref()
    if ref is None or ref.kind != kind or not ref.name:
        return None
    key = f"{obj.namespace}/{ref.name}"
    owner = owners.get(key)
    return key if owner is not None and owner.uid == ref.uid else None


async def delete_owned(
    client: KubeClient,
    resource: Resource,
    obj: KubeObject,
    *,
    owner: KubeObject,
    expectations: Expectations,
    recorder: Recorder,
) -> str | None:
    """Delete `obj` (UID precondition); None when done, else the error's text. A refused
    or pointless delete lowers the owner's expectation at once; Events go on the owner."""
    what = f"{resource.kind} {obj.name}"
    try:
        async with asyncio.timeout(WRITE_TIMEOUT):
            await client.delete(resource, obj.name, namespace=obj.namespace,
                                options=DeleteOptions(uid=obj.uid))  # fmt: skip
    except (NotFound, Conflict):
        expectations.deletion_observed(owner.key, obj.uid)
        return None
    except (ApiError, TransportError, TimeoutError) as e:
        expectations.deletion_observed(owner.key, obj.uid)
        recorder.event(owner, EventType.WARNING, "FailedDelete", f"Error deleting {what}: {e}")
        return str(e)
    log.info("owned_deleted", kind=resource.kind, name=obj.name, uid=obj.uid)
    recorder.event(owner, EventType.NORMAL, "SuccessfulDelete", f"Deleted {what} ({obj.uid})")
    return None
