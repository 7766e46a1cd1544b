"""JSON merge patch (RFC 7386): compute one from two documents and apply one to a third.

The status writer diffs what a sync started from against what it wants, and re-applies
only that difference onto fresh state after a conflict, so fields another writer changed
meanwhile (the handler's, if we are the controller) survive. Lists are atoms in merge
patches: a changed list is replaced whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.model._codec import copy_json


def merge_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that turns `old` into `new` ({} when they are equal)."""
    patch: dict[str, Any] = {}
    for key in old:
        if key not in new:
            patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = copy_json(value)
            continue
        before = old[key]
        if before == value:
            continue
        if isinstance(before, Mapping) and isinstance(value, Mapping):
            sub = merge_diff(before, value)
            if sub:
                patch[key] = sub
        else:
            patch[key] = copy_json(value)
    return patch


def merge_apply(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """`target` with `patch` applied (neither argument is modified)."""
    out: dict[str, Any] = {k: copy_json(v) for k, v in target.items()}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping):
            base = out.get(key)
            out[key] = merge_apply(base if isinstance(base, Mapping) else {}, value)
        else:
            out[key] = copy_json(value)
    return out
