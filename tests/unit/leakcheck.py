"""Leak checks for the daemons' unit tests: the size of every container a daemon's object
graph reaches, by attribute path, so a churn test can say which table kept entries for
objects that are gone.

    before = sizes(graph)
    ... N create → delete cycles ...
    assert grown(before, sizes(graph)) == {}   # {"loops.vmi.queue._backoff._failures": (0, 12)}

`sizes` walks instance attributes (`__dict__` and `__slots__`), dicts, lists, tuples,
sets and deques from the root breadth-first, each object once (named by its shortest
path), up to `depth` levels, and records the length of every dict, set, list and deque it
meets. A bound method leads to its object. It does not enter functions, modules, classes,
coroutines, tasks, futures or the event loop, nor any object whose type is in `skip` (the
test's own fakes). Entries of a table are named by their key (`x['ns/vm1']`); what hangs
off a grown table's new entries is reported as that table's growth only.
"""

from __future__ import annotations

import asyncio
import types
from collections import deque
from collections.abc import Iterator, Mapping

Sizes = dict[str, int]
_CONTAINERS = (dict, set, frozenset, list, deque)
_OPAQUE = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.ModuleType,
    type,
    types.CoroutineType,
    types.GeneratorType,
    asyncio.AbstractEventLoop,
    asyncio.Task,
    asyncio.Future,
    str,
    bytes,
    int,
    float,
)


def sizes(root: object, *, depth: int = 10, skip: tuple[type, ...] = ()) -> Sizes:
    """Every container reachable from `root`, by its shortest path, with its length."""
    out: Sizes = {}
    seen: set[int] = set()
    todo: deque[tuple[object, str, int]] = deque([(root, "", 0)])
    while todo:
        obj, path, level = todo.popleft()
        if isinstance(obj, types.MethodType):
            obj = obj.__self__
        if id(obj) in seen or level > depth or isinstance(obj, _OPAQUE + skip):
            continue
        seen.add(id(obj))
        if isinstance(obj, _CONTAINERS):
            out[path] = len(obj)
        for name, child in _children(obj):
            todo.append((child, f"{path}.{name}" if path else name, level + 1))
    return out


def _children(obj: object) -> Iterator[tuple[str, object]]:
    if isinstance(obj, Mapping):
        for key, value in list(obj.items()):
            yield f"[{key!r}]", value
        return
    if isinstance(obj, list | tuple | set | frozenset | deque):
        for i, value in enumerate(list(obj)):
            yield f"[{i}]", value
        return
    for name, value in _attributes(obj):
        yield name, value


def _attributes(obj: object) -> Iterator[tuple[str, object]]:
    attrs = getattr(obj, "__dict__", None)
    if isinstance(attrs, dict):
        yield from list(attrs.items())
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if hasattr(obj, name) and name not in ("__dict__", "__weakref__"):
                yield name, getattr(obj, name)


def grown(before: Sizes, after: Sizes) -> dict[str, tuple[int, int]]:
    """Containers of `before` that hold more now, and containers that were not there."""
    out: dict[str, tuple[int, int]] = {}
    for path, n in sorted(after.items()):
        # What hangs off a grown table's new entries is that table's growth, not news.
        if any(path.startswith(f"{table}.[") for table in out):
            continue
        was = before.get(path, 0)
        if n > was:
            out[path] = (was, n)
    return out
