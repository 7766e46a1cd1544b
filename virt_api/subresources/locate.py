"""Finding the handler that can act on a VMI: status.nodeName → the Node's endpoint annotation.

Each handler publishes its actions endpoint on its own Node as
`kubevirt.io/handler-endpoint: https://<ip>:<port>` (locally both handlers share one host,
so each binds its own port). A VMI can be acted on only while it is Running on a node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from shared.kube import NODES, VMIS, KubeError
from shared.kube import NotFound as KubeNotFound
from shared.kube.ports import Gets
from shared.labels import HANDLER_ENDPOINT_ANNOTATION
from shared.model import VirtualMachineInstance, VMIPhase
from virt_api.subresources.errors import (
    HandlerUnavailable,
    NotFound,
    NotRunning,
    SubresourceError,
    VmiRef,
)


class ClusterReader(Protocol):
    """The reads locating needs; raises shared.kube.NotFound for missing objects."""

    async def get_vmi(self, namespace: str, name: str) -> VirtualMachineInstance: ...

    async def get_node(self, name: str) -> Mapping[str, Any]: ...


class KubeReader:
    """`ClusterReader` over a KubeClient."""

    def __init__(self, client: Gets) -> None:
        self._client = client

    async def get_vmi(self, namespace: str, name: str) -> VirtualMachineInstance:
        return VirtualMachineInstance.from_dict(
            await self._client.get(VMIS, name, namespace=namespace)
        )

    async def get_node(self, name: str) -> Mapping[str, Any]:
        return await self._client.get(NODES, name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """A running VMI and the actions endpoint of the handler on its node."""

    vmi: VmiRef
    node: str
    endpoint: str  # https://<ip>:<port>


async def locate(reader: ClusterReader, vmi: VmiRef) -> Target:
    """The target of an action on `vmi`: 404 when absent, 409 when not running on a node,
    503 when its node's handler has published no endpoint, 500 when the API fails."""
    try:
        obj = await reader.get_vmi(vmi.namespace, vmi.name)
    except KubeNotFound as e:
        raise NotFound(
            f'virtualmachineinstance "{vmi.namespace}/{vmi.name}" not found', vmi=vmi
        ) from e
    except KubeError as e:
        raise SubresourceError(f"cannot read the VMI: {e}", vmi=vmi) from e
    phase, node = obj.status.phase_or_unset, obj.status.node_name
    if phase is not VMIPhase.RUNNING or not node:
        raise NotRunning(
            f'virtualmachineinstance "{vmi.namespace}/{vmi.name}" is not running '
            f"(phase {phase.value or 'unset'!r}, node {node or 'none'!r})",
            vmi=vmi,
        )
    try:
        annotations = (await reader.get_node(node)).get("metadata", {}).get("annotations") or {}
    except KubeNotFound:
        annotations = {}
    except KubeError as e:
        raise SubresourceError(f"cannot read node {node!r}: {e}", vmi=vmi) from e
    endpoint = str(annotations.get(HANDLER_ENDPOINT_ANNOTATION) or "")
    if not _valid_endpoint(endpoint):
        raise HandlerUnavailable(
            f"the handler of node {node!r} has published no actions endpoint "
            f"(annotation {HANDLER_ENDPOINT_ANNOTATION} is {endpoint or 'absent'!r})",
            vmi=vmi,
        )
    return Target(vmi=vmi, node=node, endpoint=endpoint.rstrip("/"))


def _valid_endpoint(url: str) -> bool:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    return parts.scheme == "https" and bool(parts.hostname) and port is not None
