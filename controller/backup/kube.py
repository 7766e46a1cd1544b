"""The backup controller's API calls: trackers, the target pod, namespace labels, and the
backup action through the aggregated API (PUT subresources.kubevirt.io/…/
virtualmachineinstances/<name>/backup, as the snapshot controller asks for a freeze)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from shared.actions import Action
from shared.kube import PODS, PVCS, VMI_ACTIONS, AlreadyExists, KubeClient, NotFound, Resource
from shared.kube.resources import NAMESPACES, VMBACKUPTRACKERS
from shared.model.backup import BackupCheckpoint, VirtualMachineBackupTracker
from shared.wire.backup import BackupReply, BackupRequest

IO_TIMEOUT = 10.0
ACTION_TIMEOUT = 45.0  # the freeze, backupBegin and the thaw happen within the call


class BackupKube:
    """The reads and writes of one sync, each under a timeout."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    async def _get(self, resource: Resource, name: str, namespace: str | None) -> Any:
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                return await self._client.get(resource, name, namespace=namespace)
        except NotFound:
            return None

    async def tracker(self, namespace: str, name: str) -> VirtualMachineBackupTracker | None:
        raw = await self._get(VMBACKUPTRACKERS, name, namespace)
        return VirtualMachineBackupTracker.from_dict(raw) if raw is not None else None

    async def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        raw = await self._get(NAMESPACES, namespace, None)
        return dict(((raw or {}).get("metadata") or {}).get("labels") or {})

    async def pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        raw: Mapping[str, Any] | None = await self._get(PODS, name, namespace)
        return raw

    async def claim_exists(self, namespace: str, name: str) -> bool:
        return await self._get(PVCS, name, namespace) is not None

    async def create_pod(self, body: Mapping[str, Any]) -> None:
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                await self._client.create(PODS, body)
        except AlreadyExists:
            return

    async def delete_pod(self, namespace: str, name: str) -> None:
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                await self._client.delete(PODS, name, namespace=namespace)
        except NotFound:
            return

    async def backup_action(self, namespace: str, vmi: str, request: BackupRequest) -> BackupReply:
        """Ask the VMI's handler (and its launcher) to start or report the backup."""
        async with asyncio.timeout(ACTION_TIMEOUT):
            raw = await self._client.call_subresource(
                "PUT",
                VMI_ACTIONS,
                vmi,
                namespace=namespace,
                subresource=Action.BACKUP,
                body=request.to_wire(),
            )
        return BackupReply.from_wire(raw)

    async def record_checkpoint(
        self, tracker: VirtualMachineBackupTracker, checkpoint: BackupCheckpoint
    ) -> None:
        """The tracker's latestCheckpoint: the base of its next incremental backup."""
        patch = {
            "status": {
                "latestCheckpoint": checkpoint.to_dict(),
                "checkpointRedefinitionRequired": None,
            }
        }
        try:
            async with asyncio.timeout(IO_TIMEOUT):
                await self._client.patch(
                    VMBACKUPTRACKERS,
                    tracker.name,
                    patch,
                    namespace=tracker.namespace,
                    subresource="status",
                )
        except NotFound:
            return
