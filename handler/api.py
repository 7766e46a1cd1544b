"""What the handler needs of the Kubernetes API, as one Protocol, and its real adapter.

The daemon is built against `HandlerApi`, so unit and launcher-level integration tests can
run it against an in-memory API, and the real one is `KubeApi` over shared.kube's client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from shared.kube import (
    KUBEVIRTS,
    NODES,
    PODS,
    VMIMS,
    VMIS,
    KubeClient,
    ListWatch,
    PatchType,
    Resource,
    Selector,
    Source,
)
from shared.kube.ports import Patches
from shared.model import VirtualMachineInstance


class HandlerApi(Patches, Protocol):
    """VMI list/watch and status writes, VMI reads after a conflict, Node patches and reads."""

    def vmi_source(self, *, label_selector: str) -> Source: ...

    def vmim_source(self) -> Source: ...

    def kubevirt_source(self, namespace: str) -> Source: ...

    async def get_vmi(self, namespace: str, name: str) -> VirtualMachineInstance: ...

    async def patch_node(self, name: str, patch: Mapping[str, Any]) -> None: ...

    async def get_pod(self, namespace: str, name: str) -> Mapping[str, Any]: ...

    async def node_allocatable(self, name: str) -> dict[str, str]: ...

    async def node_labels(self, name: str) -> dict[str, str]: ...

    async def update_status(
        self, resource: Resource, body: Mapping[str, Any]
    ) -> dict[str, Any]: ...


class KubeApi:
    """`HandlerApi` over a KubeClient."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client

    def vmi_source(self, *, label_selector: str) -> Source:
        return ListWatch(self._client, VMIS, Selector(labels=label_selector))

    def vmim_source(self) -> Source:
        """Every VMIM: the target side finds its migrations in their status."""
        return ListWatch(self._client, VMIMS, Selector())

    def kubevirt_source(self, namespace: str) -> Source:
        """The KubeVirt CR(s) of the daemons' namespace: the live cluster configuration."""
        return ListWatch(self._client, KUBEVIRTS, Selector(namespace=namespace))

    async def get_vmi(self, namespace: str, name: str) -> VirtualMachineInstance:
        return VirtualMachineInstance.from_dict(
            await self._client.get(VMIS, name, namespace=namespace)
        )

    async def get_pod(self, namespace: str, name: str) -> Mapping[str, Any]:
        """A pod (a backup's target pod: handler/backup.py)."""
        return await self._client.get(PODS, name, namespace=namespace)

    async def patch_node(self, name: str, patch: Mapping[str, Any]) -> None:
        await self._client.patch(NODES, name, patch)

    async def node_allocatable(self, name: str) -> dict[str, str]:
        status = (await self._client.get(NODES, name)).get("status") or {}
        return {k: str(v) for k, v in (status.get("allocatable") or {}).items()}

    async def node_labels(self, name: str) -> dict[str, str]:
        labels = (await self._client.get(NODES, name)).get("metadata", {}).get("labels") or {}
        return {str(k): str(v) for k, v in labels.items()}

    async def update_status(self, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        return await self._client.update_status(resource, body)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | list[dict[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        return await self._client.patch(
            resource,
            name,
            patch,
            namespace=namespace,
            patch_type=patch_type,
            subresource=subresource,
        )
