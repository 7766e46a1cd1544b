"""The API reads and writes of the snapshot family, each bounded by a timeout: contents,
CSI VolumeSnapshots, claims and classes, and the guest freeze through the aggregated API
(PUT subresources.kubevirt.io/.../virtualmachineinstances/<name>/freeze, as virtctl does)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import structlog

from controller.errors import SyncError
from controller.snapshot.logic import VSState, content_name, vs_state
from shared.actions import Action
from shared.duration import format_duration
from shared.kube import (
    PVCS,
    STORAGECLASSES,
    VMI_ACTIONS,
    VMSNAPSHOTCONTENTS,
    VOLUMESNAPSHOTCLASSES,
    VOLUMESNAPSHOTS,
    AlreadyExists,
    ApiError,
    KubeClient,
    NotFound,
    Resource,
    TransportError,
)
from shared.model import VirtualMachineInstance, format_time
from shared.model.snapshot import (
    ContentStatus,
    SnapshotError,
    VirtualMachineSnapshot,
    VirtualMachineSnapshotContent,
    VolumeSnapshotState,
)

log = structlog.get_logger("controller.snapshot")

IO_TIMEOUT = 10.0


class SnapshotKube:
    """The snapshot controllers' door to the API server."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    async def get(
        self, resource: Resource, name: str, namespace: str | None
    ) -> dict[str, Any] | None:
        """The object, None when missing."""
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                return await self._client.get(resource, name, namespace=namespace)
        except NotFound:
            return None

    async def create(self, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create; an existing object of the name is read back (a retried sync)."""
        meta = body["metadata"]
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                made = await self._client.create(resource, body, namespace=meta.get("namespace"))
        except AlreadyExists:
            found = await self.get(resource, meta["name"], meta.get("namespace"))
            if found is None:
                raise SyncError(
                    "FailedCreate", f"{resource.kind} {meta['name']} vanished"
                ) from None
            return found
        except (ApiError, TransportError) as e:
            raise SyncError("FailedCreate", f"{resource.kind} {meta['name']}: {e}") from e
        log.info("snapshot_object_created", kind=resource.kind, name=meta["name"])
        return made

    async def delete(self, resource: Resource, name: str, namespace: str) -> None:
        """Delete (what it owns goes by garbage collection); gone already is fine."""
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                await self._client.delete(resource, name, namespace=namespace)
        except NotFound:
            return

    async def content(self, snap: VirtualMachineSnapshot) -> VirtualMachineSnapshotContent | None:
        raw = await self.get(VMSNAPSHOTCONTENTS, content_name(snap), snap.namespace)
        return VirtualMachineSnapshotContent.from_dict(raw) if raw is not None else None

    async def create_content(self, body: Mapping[str, Any]) -> VirtualMachineSnapshotContent:
        return VirtualMachineSnapshotContent.from_dict(await self.create(VMSNAPSHOTCONTENTS, body))

    async def create_volume_snapshot(self, body: Mapping[str, Any]) -> None:
        await self.create(VOLUMESNAPSHOTS, body)

    async def volume_snapshots(self, namespace: str, names: list[str]) -> dict[str, VSState]:
        """The VolumeSnapshots of these names that exist."""
        out: dict[str, VSState] = {}
        for name in names:
            raw = await self.get(VOLUMESNAPSHOTS, name, namespace)
            if raw is not None:
                out[name] = vs_state(raw)
        return out

    async def claim(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self.get(PVCS, name, namespace)

    async def storage_classes(self) -> list[Mapping[str, Any]]:
        async with asyncio.timeout(IO_TIMEOUT):
            return list((await self._client.list_all(STORAGECLASSES)).items)

    async def snapshot_classes(self) -> list[Mapping[str, Any]]:
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                return list((await self._client.list_all(VOLUMESNAPSHOTCLASSES)).items)
        except NotFound:
            return []  # the VolumeSnapshot CRDs are not installed: nothing is snapshottable

    async def freeze(self, vmi: VirtualMachineInstance, *, unfreeze_seconds: float) -> None:
        """Freeze the guest's filesystems (the launcher thaws by itself after the timeout)."""
        body = {"unfreezeTimeout": format_duration(unfreeze_seconds)}
        await self._client.call_subresource(
            "PUT",
            VMI_ACTIONS,
            vmi.name,
            namespace=vmi.namespace,
            subresource=Action.FREEZE,
            body=body,
        )

    async def unfreeze(self, vmi: VirtualMachineInstance) -> None:
        """Thaw (a no-op on a guest that is not frozen)."""
        async with asyncio.timeout(IO_TIMEOUT * 3):
            await self._client.call_subresource(
                "PUT", VMI_ACTIONS, vmi.name, namespace=vmi.namespace, subresource=Action.UNFREEZE
            )

    async def write_content_status(
        self,
        content: VirtualMachineSnapshotContent,
        states: Mapping[str, VSState],
        ready: bool,
        now: datetime,
    ) -> None:
        """The content's readyToUse and its VolumeSnapshots' states (when they changed)."""
        stamp = format_time(now)
        volumes = tuple(
            VolumeSnapshotState(
                volume_snapshot_name=name,
                creation_time=s.creation_time,
                ready_to_use=s.ready,
                error=SnapshotError(time=stamp, message=s.error) if s.error else None,
            )
            for name, s in sorted(states.items())
        )
        status = ContentStatus(
            creation_time=content.status.creation_time or (stamp if ready else None),
            ready_to_use=ready,
            volume_snapshot_status=volumes,
        )
        if status == content.status:
            return
        patch = {
            "metadata": {"resourceVersion": content.metadata.resource_version},
            "status": status.to_dict(),
        }
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                await self._client.patch(
                    VMSNAPSHOTCONTENTS,
                    content.name,
                    patch,
                    namespace=content.namespace,
                    subresource="status",
                )
        except NotFound:
            return
