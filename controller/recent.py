"""Our own writes, remembered until the informer has caught up with them.

After the controller writes a VMI's status, the next sync of that VMI often runs before
the VMI informer delivers the write (the pod informer's event for the new pod triggers it).
Planning from the stale cache would compute the same change again and write it a second
time (or meet a Conflict and write after a refresh): wasted writes, conflict churn. So a
sync plans from whichever is newer, the cached object or the one our last write returned.

Entries are dropped as soon as the informer delivers a version at least as new, so in the
steady state the map is empty and costs no memory per object. resourceVersions are
compared as integers (etcd revisions); an unparsable one drops the entry.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from shared.model import KubeObject

M = TypeVar("M", bound=KubeObject)


def _rv(obj: KubeObject) -> int | None:
    try:
        return int(obj.metadata.resource_version or "")
    except ValueError:
        return None


class Recent(Generic[M]):
    """Objects as our last write returned them, keyed "namespace/name"."""

    def __init__(self) -> None:
        self._written: dict[str, M] = {}

    def remember(self, obj: M) -> None:
        """Record what a write returned; a write that removed a deleted object's last
        finalizer returned an object that is gone (its delete event may already have been
        handled, so nothing would forget it)."""
        if obj.metadata.is_deleting and not obj.metadata.finalizers:
            self._written.pop(obj.key, None)
            return
        self._written[obj.key] = obj

    def get(self, key: str) -> M | None:
        """What our last write of `key` returned, if not yet superseded."""
        return self._written.get(key)

    def latest(self, cached: M | None) -> M | None:
        """The newer of the cached object and our last write of it (same UID only)."""
        if cached is None:
            return None
        mine = self._written.get(cached.key)
        if mine is None:
            return cached
        if mine.uid != cached.uid:
            self._written.pop(cached.key, None)
            return cached
        mine_rv, cached_rv = _rv(mine), _rv(cached)
        if mine_rv is None or cached_rv is None or cached_rv >= mine_rv:
            self._written.pop(cached.key, None)
            return cached
        return mine

    def observe(self, cached: M) -> None:
        """The informer delivered `cached`: drop our copy if it is no newer."""
        self.latest(cached)

    def forget(self, key: str) -> None:
        """The object is gone."""
        self._written.pop(key, None)

    def __len__(self) -> int:
        return len(self._written)
