"""Output formats for commands whose answer is data: table, json, yaml."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml


def render(data: Any, *, fmt: str, columns: Sequence[tuple[str, str]] = ()) -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=True)
    if fmt == "yaml":
        return yaml.safe_dump(data, sort_keys=False).rstrip()
    return table(data, columns)


def table(data: Any, columns: Sequence[tuple[str, str]]) -> str:
    """Rows from ``data['items']`` (or a single map), columns as (HEADER, key.path)."""
    rows: list[Mapping[str, Any]] = list(data.get("items", [])) if "items" in data else [data]
    if not columns:
        return "\n".join(f"{k}: {v}" for k, v in _flatten(data))
    cells = [[h for h, _ in columns]] + [[_cell(row, path) for _, path in columns] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    return "\n".join(
        "   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def _cell(row: Mapping[str, Any], path: str) -> str:
    value: Any = row
    for key in path.split("."):
        value = value.get(key, "") if isinstance(value, Mapping) else ""
    return "" if value is None else str(value)


def _flatten(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(data, Mapping):
        out: list[tuple[str, Any]] = []
        for key, value in data.items():
            out += _flatten(value, f"{prefix}{key}.")
        return out
    return [(prefix.rstrip("."), data)]
