"""The worker pods' watch: a DataVolume is synced as soon as its importer pod changes.

The controller still GETs the pod in its sync (the pod is the DataVolume's to read); the
watch only says when. Without it the DataVolume followed its pod one status poll late: a
finished import waited up to a poll interval to show Succeeded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.datavolume.pods import APP, APP_LABEL, DV_LABEL

# The worker pods (importer, clone, upload server): CDI's app label.
WORKER_SELECTOR = f"{APP_LABEL}={APP}"


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerView:
    """A worker pod as the watch keeps it: whose it is, and its phase."""

    name: str
    namespace: str
    datavolume: str  # the controlling DataVolume's name, else its label ("" when missing)
    phase: str

    @property
    def datavolume_key(self) -> str | None:
        """The key of the DataVolume the pod works for."""
        return f"{self.namespace}/{self.datavolume}" if self.datavolume else None


def decode_worker(raw: Mapping[str, Any]) -> WorkerView:
    """Only the fields the watch needs (the sync GETs the pod)."""
    meta = raw.get("metadata") or {}
    return WorkerView(
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        datavolume=_owner(meta) or str((meta.get("labels") or {}).get(DV_LABEL) or ""),
        phase=str((raw.get("status") or {}).get("phase") or "Pending"),
    )


def _owner(meta: Mapping[str, Any]) -> str | None:
    """The controlling DataVolume's name: the label holds it cut to 63 characters
    (shared.naming), the owner reference in full."""
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") == "DataVolume" and ref.get("controller"):
            return str(ref.get("name") or "") or None
    return None
