"""The one place that writes VMI / VM / migration status (and the metadata the daemons own).

Every write costs an API request and, on a busy object, a conflict; KubeVirt spends ≈ 8.5
writes per VMI and its users complain of conflict churn. So:
- `write_status(old, new)` diffs old.status against new.status and skips a no-op write;
  otherwise PUTs the status subresource carrying `old`'s resourceVersion (optimistic
  concurrency).
- On Conflict it calls `refresh()` for fresh state (a GET, or the cache once it caught up),
  re-applies only *our* difference (a merge patch) onto the fresh status, and retries — a
  bounded number of times. Fields another writer changed meanwhile survive; if the fresh
  object already carries our change the write is skipped.
- `write_metadata(old, new)` does the same for labels, annotations and finalizers with a
  merge patch that carries the resourceVersion.
- Writes are counted per verb (`counts`, and kubevirt_py_status_writes_total) so tests and
  benchmarks can check the writes-per-VMI budget.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import structlog

from shared.kube.api_types import PatchType
from shared.kube.errors import Conflict
from shared.kube.mergepatch import copy_json, merge_apply, merge_diff
from shared.kube.metrics import Registry
from shared.kube.resources import Resource
from shared.model import KubeObject

log = structlog.get_logger("shared.kube.status")

M = TypeVar("M", bound=KubeObject)
Refresh = Callable[[], Awaitable[M]]

UPDATE_STATUS = "update_status"
PATCH_METADATA = "patch_metadata"
SKIPPED = "skipped"
CONFLICT = "conflict"
OWNED_METADATA = ("labels", "annotations", "finalizers")


class StatusClient(Protocol):
    """The two client calls the writer needs (KubeClient satisfies it)."""

    async def update_status(
        self, resource: Resource, body: Mapping[str, Any]
    ) -> dict[str, Any]: ...

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any] | list[dict[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class StatusWriterConfig:
    """How many attempts (first write + conflict retries) before Conflict escapes."""

    max_attempts: int = 4


class StatusWriter(Generic[M]):
    """Writes one resource's status and owned metadata, skipping no-ops, retrying conflicts."""

    def __init__(
        self,
        client: StatusClient,
        resource: Resource,
        *,
        model: type[M],
        registry: Registry,
        config: StatusWriterConfig | None = None,
    ) -> None:
        self._client = client
        self._resource = resource
        self._model = model
        self._config = config or StatusWriterConfig()
        self.counts: Counter[str] = Counter()
        self._metric = registry.counter(
            "kubevirt_py_status_writes_total",
            "Status and metadata writes by the status writer, by outcome.",
            ("resource", "verb"),
        )

    async def write(self, old: M, new: M, *, refresh: Refresh[M]) -> M:
        """Owned metadata first (if changed), then status (if changed); returns the result."""
        current = await self.write_metadata(old, new, refresh=refresh)
        status_patch = merge_diff(_status(old.to_dict()), _status(new.to_dict()))
        if not status_patch:
            self._count(SKIPPED)
            return current
        return await self._put_status(current.to_dict(), status_patch, refresh)

    async def write_status(self, old: M, new: M, *, refresh: Refresh[M]) -> M:
        """PUT new.status unless it equals old.status; returns the object as written."""
        old_d = old.to_dict()
        patch = merge_diff(_status(old_d), _status(new.to_dict()))
        if not patch:
            self._count(SKIPPED)
            return old
        return await self._put_status(old_d, patch, refresh)

    async def write_metadata(self, old: M, new: M, *, refresh: Refresh[M]) -> M:
        """Patch labels / annotations / finalizers to new's unless unchanged."""
        intent = _MetaIntent.between(old.to_dict(), new.to_dict())
        if intent.empty:
            return old
        base = old.to_dict()
        for attempt in range(1, self._config.max_attempts + 1):
            patch = intent.patch_for(base)
            if patch is None:
                self._count(SKIPPED)
                return self._model.from_dict(base)
            try:
                result = await self._client.patch(
                    self._resource, old.name, patch, namespace=old.namespace or None
                )
            except Conflict:
                self._conflicted(old, attempt)
                base = (await refresh()).to_dict()
                continue
            self._count(PATCH_METADATA)
            return self._model.from_dict(result)
        raise _exhausted(old, self._config.max_attempts)

    async def _put_status(
        self, base: dict[str, Any], patch: dict[str, Any], refresh: Refresh[M]
    ) -> M:
        for attempt in range(1, self._config.max_attempts + 1):
            wanted = merge_apply(_status(base), patch)
            if attempt > 1 and wanted == _status(base):
                self._count(SKIPPED)  # the fresh object already says what we wanted
                return self._model.from_dict(base)
            body = {**base, "status": wanted}
            try:
                result = await self._client.update_status(self._resource, body)
            except Conflict:
                obj = self._model.from_dict(base)
                self._conflicted(obj, attempt)
                base = (await refresh()).to_dict()
                continue
            self._count(UPDATE_STATUS)
            return self._model.from_dict(result)
        raise _exhausted(self._model.from_dict(base), self._config.max_attempts)

    def _count(self, verb: str) -> None:
        self.counts[verb] += 1
        self._metric.labels(self._resource.plural, verb).inc()

    def _conflicted(self, obj: KubeObject, attempt: int) -> None:
        self._count(CONFLICT)
        log.info(
            "status_write_conflict",
            resource=self._resource.plural,
            key=obj.key,
            attempt=attempt,
            resource_version=obj.metadata.resource_version,
        )


@dataclass(frozen=True, slots=True)
class _MetaIntent:
    """What a sync wants changed in owned metadata, re-applicable onto fresh objects."""

    maps: dict[str, dict[str, Any]]  # labels / annotations merge patches
    added_finalizers: tuple[str, ...]
    removed_finalizers: frozenset[str]

    @classmethod
    def between(cls, old: Mapping[str, Any], new: Mapping[str, Any]) -> _MetaIntent:
        om, nm = old.get("metadata") or {}, new.get("metadata") or {}
        maps = {}
        for field in ("labels", "annotations"):
            diff = merge_diff(om.get(field) or {}, nm.get(field) or {})
            if diff:
                maps[field] = diff
        of, nf = list(om.get("finalizers") or ()), list(nm.get("finalizers") or ())
        added = tuple(f for f in nf if f not in of)
        return cls(maps, added, frozenset(f for f in of if f not in nf))

    @property
    def empty(self) -> bool:
        return not (self.maps or self.added_finalizers or self.removed_finalizers)

    def patch_for(self, base: Mapping[str, Any]) -> dict[str, Any] | None:
        """The merge patch taking `base` to our intent, or None when it already matches."""
        meta = base.get("metadata") or {}
        out: dict[str, Any] = {}
        for field, diff in self.maps.items():
            current = meta.get(field) or {}
            if merge_apply(current, diff) != current:
                out[field] = copy_json(diff)
        current_f = list(meta.get("finalizers") or ())
        wanted_f = [f for f in current_f if f not in self.removed_finalizers]
        wanted_f += [f for f in self.added_finalizers if f not in wanted_f]
        if wanted_f != current_f:
            out["finalizers"] = wanted_f
        if not out:
            return None
        out["resourceVersion"] = meta.get("resourceVersion")
        return {"metadata": out}


def _status(obj: Mapping[str, Any]) -> dict[str, Any]:
    status = obj.get("status")
    return dict(status) if isinstance(status, Mapping) else {}


def _exhausted(obj: KubeObject, attempts: int) -> Conflict:
    log.warning("status_write_gave_up", key=obj.key, attempts=attempts)
    return Conflict(409, "Conflict", f"{obj.key}: still conflicting after {attempts} attempts")
