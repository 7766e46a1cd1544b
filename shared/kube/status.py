"""The one place that writes VMI / VM / migration status (and the metadata the daemons own).

Every write costs an API request and, on a busy object, a conflict; KubeVirt spends ≈ 8.5
writes per VMI and its users complain of conflict churn. So every write is a merge patch
of only what changed, with the resourceVersion it was planned from as a precondition:

    PATCH .../<name>         {"metadata": {"resourceVersion": rv, "labels": …, "finalizers": […]}}
    PATCH .../<name>/status  {"metadata": {"resourceVersion": rv}, "status": <merge diff>}

- `write_status(old, new)` diffs old.status against new.status and skips a no-op write.
- `write_metadata(old, new)` does the same for labels, annotations and finalizers.
- `write(old, new)` does both (metadata first: the status subresource ignores metadata).
- The object returned is the planned one (`old` with `new`'s status / owned metadata) at
  the server's new resourceVersion; the answer is not decoded into a model (at a thousand
  VMIs, decoding answers and encoding whole objects was a third of the controller's CPU).
  Fields the model does not know are never sent, so a patch cannot wipe them.
- On Conflict it calls `refresh()` for fresh state (a GET, or the cache once it caught up),
  re-applies only *our* difference onto it and retries, a bounded number of times. Fields
  another writer changed meanwhile survive; if the fresh object already carries our change
  the write is skipped.
- Writes are counted per verb (`counts`, and kubevirt_py_status_writes_total) so tests and
  benchmarks can check the writes-per-VMI budget.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import structlog

from shared.kube.errors import Conflict
from shared.kube.mergepatch import merge_apply, merge_diff
from shared.kube.metrics import Registry
from shared.kube.ports import Patches
from shared.kube.resources import Resource
from shared.model import KubeObject, ObjectMeta
from shared.model._codec import copy_json

log = structlog.get_logger("shared.kube.status")

M = TypeVar("M", bound=KubeObject)
Refresh = Callable[[], Awaitable[M]]

PATCH_STATUS = "patch_status"
PATCH_METADATA = "patch_metadata"
SKIPPED = "skipped"
CONFLICT = "conflict"
OWNED_METADATA = ("labels", "annotations", "finalizers")


@dataclass(frozen=True, slots=True)
class StatusWriterConfig:
    """How many attempts (first write + conflict retries) before Conflict escapes; 1 hands
    every Conflict to the caller (a controller that re-plans from fresh state)."""

    max_attempts: int = 4


class StatusWriter(Generic[M]):
    """Writes one resource's status and owned metadata, skipping no-ops, retrying conflicts."""

    def __init__(
        self,
        client: Patches,
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
        return await self.write_status(current, new, refresh=refresh, base=old)

    async def write_status(
        self, old: M, new: M, *, refresh: Refresh[M], base: M | None = None
    ) -> M:
        """Patch new.status unless it equals old.status; returns the object as written.

        `base` (default `old`) is what the diff is taken from when `old` is already a
        newer version of it (write() after a metadata patch)."""
        patch = merge_diff(_status_dict(base or old), _status_dict(new))
        if not patch:
            self._count(SKIPPED)
            return old
        rv = old.metadata.resource_version
        try:
            answer = await self._patch(
                old, {"metadata": {"resourceVersion": rv}, "status": patch}, "status"
            )
        except Conflict:
            self._conflicted(old, 1)
            return await self._retry_status(old, patch, refresh)
        self._count(PATCH_STATUS)
        return dataclasses.replace(
            old,
            status=_status_of(new),  # type: ignore[call-arg]
            metadata=_at_version(old.metadata, answer, rv),
        )

    async def write_metadata(self, old: M, new: M, *, refresh: Refresh[M]) -> M:
        """Patch labels / annotations / finalizers to new's unless unchanged."""
        intent = _MetaIntent.between(_owned(old.metadata), _owned(new.metadata))
        if intent.empty:
            return old
        base = _owned(old.metadata)
        fresh: dict[str, Any] | None = None  # the whole object, once refreshed
        for attempt in range(1, self._config.max_attempts + 1):
            patch = intent.patch_for(base)
            if patch is None:
                self._count(SKIPPED)
                return old if fresh is None else self._model.from_dict(fresh)
            try:
                answer = await self._patch(old, patch, None)
            except Conflict:
                self._conflicted(old, attempt)
                if attempt == self._config.max_attempts:
                    break
                fresh = (await refresh()).to_dict()
                base = fresh
                continue
            self._count(PATCH_METADATA)
            if fresh is None:
                meta = _apply_owned(old.metadata, patch["metadata"])
                return dataclasses.replace(old, metadata=_at_version(meta, answer, None))
            merged = merge_apply(fresh, patch)
            merged["metadata"]["resourceVersion"] = _answer_rv(answer)
            return self._model.from_dict(merged)
        raise _exhausted(old, self._config.max_attempts)

    async def _retry_status(self, old: M, patch: dict[str, Any], refresh: Refresh[M]) -> M:
        """After a Conflict: re-apply `patch` onto fresh state until it sticks."""
        for attempt in range(2, self._config.max_attempts + 1):
            base = (await refresh()).to_dict()
            current = _status(base)
            wanted = merge_apply(current, patch)
            if wanted == current:
                self._count(SKIPPED)  # the fresh object already says what we wanted
                return self._model.from_dict(base)
            rv = _meta(base).get("resourceVersion")
            body = {"metadata": {"resourceVersion": rv}, "status": merge_diff(current, wanted)}
            try:
                answer = await self._patch(old, body, "status")
            except Conflict:
                self._conflicted(old, attempt)
                continue
            self._count(PATCH_STATUS)
            base["status"] = wanted
            base["metadata"]["resourceVersion"] = _answer_rv(answer) or rv
            return self._model.from_dict(base)
        raise _exhausted(old, self._config.max_attempts)

    async def _patch(self, obj: M, body: dict[str, Any], subresource: str | None) -> dict[str, Any]:
        return await self._client.patch(
            self._resource,
            obj.name,
            body,
            namespace=obj.namespace or None,
            subresource=subresource,
        )

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


def _status_of(obj: KubeObject) -> Any:
    return getattr(obj, "status", None)


def _status_dict(obj: KubeObject) -> dict[str, Any]:
    """obj.status as its wire dict (objects without a status have an empty one)."""
    status = _status_of(obj)
    return status.to_dict() if status is not None else {}


def _meta(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _owned(meta: ObjectMeta) -> dict[str, Any]:
    """The owned metadata and the resourceVersion, as a wire-shaped object."""
    return {
        "metadata": {
            "resourceVersion": meta.resource_version,
            "labels": dict(meta.labels),
            "annotations": dict(meta.annotations),
            "finalizers": list(meta.finalizers),
        }
    }


def _apply_owned(meta: ObjectMeta, patch: Mapping[str, Any]) -> ObjectMeta:
    """`meta` with a metadata merge patch of owned fields applied."""
    changes: dict[str, Any] = {}
    for field in ("labels", "annotations"):
        if field in patch:
            changes[field] = merge_apply(getattr(meta, field), patch[field])
    if "finalizers" in patch:
        changes["finalizers"] = tuple(patch["finalizers"] or ())
    return dataclasses.replace(meta, **changes)


def _answer_rv(answer: Mapping[str, Any]) -> str | None:
    rv = _meta(answer).get("resourceVersion")
    return str(rv) if rv else None


def _at_version(meta: ObjectMeta, answer: Mapping[str, Any], fallback: str | None) -> ObjectMeta:
    """`meta` at the resourceVersion the server answered with."""
    rv = _answer_rv(answer) or fallback or meta.resource_version
    return dataclasses.replace(meta, resource_version=rv)


def _exhausted(obj: KubeObject, attempts: int) -> Conflict:
    if attempts > 1:  # with one attempt, the caller re-plans on Conflict by design
        log.warning("status_write_gave_up", key=obj.key, attempts=attempts)
    return Conflict(409, "Conflict", f"{obj.key}: still conflicting after {attempts} attempts")
