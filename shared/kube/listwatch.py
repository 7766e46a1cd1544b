"""`ListWatch`: an informer `Source` over the client, bound to one resource and selector.

The handler watches only its node's VMIs (`labels="kubevirt.io/nodeName=node1"`); the
controller watches only launcher pods (`labels="kubevirt.io=virt-launcher"`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass

from shared.kube.api_types import ListResult, WatchEvent
from shared.kube.client import KubeClient
from shared.kube.resources import Resource


@dataclass(frozen=True, slots=True)
class Selector:
    """Which objects: one namespace (None = all), a label and a field selector."""

    namespace: str | None = None
    labels: str | None = None
    fields: str | None = None


class ListWatch:
    """List (paged) and watch one resource under one selector."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        selector: Selector | None = None,
        *,
        page_size: int = 500,
    ) -> None:
        self._client = client
        self._resource = resource
        self._selector = selector or Selector()
        self._page_size = page_size

    async def list(self) -> ListResult:
        """Every matching object and the resourceVersion to watch from."""
        s = self._selector
        return await self._client.list_all(
            self._resource,
            namespace=s.namespace,
            label_selector=s.labels,
            field_selector=s.fields,
            page_size=self._page_size,
        )

    def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events after `resource_version` (bookmarks on)."""
        s = self._selector
        return self._client.watch(
            self._resource,
            namespace=s.namespace,
            resource_version=resource_version,
            label_selector=s.labels,
            field_selector=s.fields,
            timeout_seconds=timeout_seconds,
        )
