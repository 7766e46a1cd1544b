"""The informer's cache: objects by key plus secondary indexes (namespace, node, owner …).

Only the informer writes it; controllers read it. Everything runs on one event loop and no
method awaits, so a read never sees a half-applied change.

Index functions are pluggable: `IndexFunc` maps an object to the index values it files
under. The stock ones accept raw dicts (Pods, Nodes) and model objects (`.metadata`) alike.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

from shared.labels import NODE_NAME_LABEL
from shared.model import ObjectMeta

T = TypeVar("T")
IndexFunc = Callable[[T], Iterable[str]]

NAMESPACE_INDEX = "namespace"
NODE_INDEX = "node"
OWNER_INDEX = "owner"


class HasMeta(Protocol):
    """A model object (VirtualMachineInstance, VirtualMachine …)."""

    @property
    def metadata(self) -> ObjectMeta: ...


def _raw_meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def by_namespace(obj: Mapping[str, Any] | HasMeta) -> list[str]:
    """metadata.namespace (cluster-scoped objects are not indexed)."""
    ns = _raw_meta(obj).get("namespace") if isinstance(obj, Mapping) else obj.metadata.namespace
    return [str(ns)] if ns else []


def by_node(obj: Mapping[str, Any] | HasMeta) -> list[str]:
    """The `kubevirt.io/nodeName` label, else a raw object's spec.nodeName (Pods)."""
    if isinstance(obj, Mapping):
        labels = _raw_meta(obj).get("labels") or {}
        node = labels.get(NODE_NAME_LABEL) or (obj.get("spec") or {}).get("nodeName")
    else:
        node = obj.metadata.labels.get(NODE_NAME_LABEL)
    return [str(node)] if node else []


def by_owner_uid(obj: Mapping[str, Any] | HasMeta) -> list[str]:
    """The UIDs of every owner reference."""
    if isinstance(obj, Mapping):
        refs = _raw_meta(obj).get("ownerReferences") or ()
        return [str(r["uid"]) for r in refs if isinstance(r, Mapping) and r.get("uid")]
    return [r.uid for r in obj.metadata.owner_references if r.uid]


def default_indexers() -> dict[str, IndexFunc[Any]]:
    """namespace, node and owner indexes (each informer gets its own dict)."""
    return {NAMESPACE_INDEX: by_namespace, NODE_INDEX: by_node, OWNER_INDEX: by_owner_uid}


class Store(Generic[T]):
    """Objects by "namespace/name" with secondary indexes kept in step on every write."""

    def __init__(self, indexers: Mapping[str, IndexFunc[T]] | None = None) -> None:
        self._items: dict[str, T] = {}
        self._indexers: dict[str, IndexFunc[T]] = dict(indexers or {})
        # index name → index value → keys filed under it
        self._indices: dict[str, dict[str, set[str]]] = {n: {} for n in self._indexers}

    # ---- reads --------------------------------------------------------------------------

    def get(self, key: str) -> T | None:
        """The cached object, if any."""
        return self._items.get(key)

    def list(self) -> list[T]:
        """Every cached object."""
        return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        """Every cached key."""
        return list(self._items)

    def by_index(self, index: str, value: str) -> builtins.list[T]:
        """Objects filed under `value` in `index` (KeyError for an unknown index)."""
        return [self._items[k] for k in self.index_keys(index, value)]

    def index_keys(self, index: str, value: str) -> builtins.list[str]:
        """Keys filed under `value` in `index`."""
        if index not in self._indices:
            raise KeyError(f"no index {index!r}")
        return sorted(self._indices[index].get(value, ()))

    def index_values(self, index: str) -> builtins.list[str]:
        """The values present in `index` (e.g. every node that has objects)."""
        return sorted(self._indices[index])

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._items))

    # ---- writes (the informer's) --------------------------------------------------------

    def upsert(self, key: str, obj: T) -> T | None:
        """Insert or replace; returns the previous object."""
        old = self._items.get(key)
        if old is not None:
            self._unindex(key, old)
        self._items[key] = obj
        self._index(key, obj)
        return old

    def remove(self, key: str) -> T | None:
        """Drop `key`; returns the object that was cached."""
        old = self._items.pop(key, None)
        if old is not None:
            self._unindex(key, old)
        return old

    def _index(self, key: str, obj: T) -> None:
        for name, fn in self._indexers.items():
            index = self._indices[name]
            for value in fn(obj):
                index.setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: T) -> None:
        for name, fn in self._indexers.items():
            index = self._indices[name]
            for value in fn(obj):
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
