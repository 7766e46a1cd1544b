"""The shapes that cross the client facade: watch events, list pages, patch and delete options."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shared.kube.errors import TransportError, error_from_status
from shared.kube.resources import Resource, with_kind


class PatchType(StrEnum):
    """Patch content types."""

    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"


class WatchEventType(StrEnum):
    """The `type` of a watch event."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    ERROR = "ERROR"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event; ERROR events never surface (they raise the typed error instead)."""

    type: WatchEventType
    object: dict[str, Any]

    @property
    def resource_version(self) -> str:
        """metadata.resourceVersion of the object ("" when absent)."""
        return str(self.object.get("metadata", {}).get("resourceVersion") or "")


@dataclass(frozen=True, slots=True)
class ListResult:
    """A list answer: the items, the collection's resourceVersion and the continue token."""

    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    """Delete options; `uid` / `resource_version` are preconditions (Conflict if stale)."""

    grace_period_seconds: int | None = None
    uid: str | None = None
    resource_version: str | None = None
    propagation_policy: str | None = None  # "Background", "Foreground" or "Orphan"

    def to_dict(self) -> dict[str, Any]:
        """The DeleteOptions body."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if self.grace_period_seconds is not None:
            body["gracePeriodSeconds"] = self.grace_period_seconds
        pre = {"uid": self.uid, "resourceVersion": self.resource_version}
        if any(pre.values()):
            body["preconditions"] = {k: v for k, v in pre.items() if v}
        if self.propagation_policy:
            body["propagationPolicy"] = self.propagation_policy
        return body


def parse_watch_event(resource: Resource, line: bytes) -> WatchEvent:
    """One line of a watch stream; ERROR events raise their typed error (410 → Gone)."""
    try:
        raw = json.loads(line)
        etype = WatchEventType(raw["type"])
        obj = raw["object"]
    except (ValueError, KeyError, TypeError) as e:
        raise TransportError(f"malformed watch event: {line[:200]!r}") from e
    if not isinstance(obj, dict):
        raise TransportError(f"malformed watch event object: {line[:200]!r}")
    if etype is WatchEventType.ERROR:
        raise error_from_status(int(obj.get("code") or 500), obj)
    if etype is not WatchEventType.BOOKMARK:
        with_kind(resource, obj)
    return WatchEvent(etype, obj)
