"""Output formats for commands whose answer is data: table, json, yaml."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import yaml

Format = Callable[[Any], str]


def render(
    data: Any,
    *,
    fmt: str,
    columns: Sequence[tuple[str, str]] = (),
    formats: Mapping[str, Format] | None = None,
) -> str:
    """json and yaml show the data as the API answered; the table formats cells by path."""
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=True)
    if fmt == "yaml":
        return yaml.safe_dump(data, sort_keys=False).rstrip()
    return table(data, columns, formats=formats)


def table(
    data: Any, columns: Sequence[tuple[str, str]], *, formats: Mapping[str, Format] | None = None
) -> str:
    """Rows from ``data['items']`` (or a single map), columns as (HEADER, key.path);
    `formats` turns a path's raw value into its cell (e.g. an epoch into a time)."""
    rows: list[Mapping[str, Any]] = list(data.get("items", [])) if "items" in data else [data]
    if not columns:
        return "\n".join(f"{k}: {v}" for k, v in _flatten(data))
    fmts = formats or {}
    cells = [[h for h, _ in columns]] + [
        [_cell(row, path, fmts.get(path)) for _, path in columns] for row in rows
    ]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    return "\n".join(
        "   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def _cell(row: Mapping[str, Any], path: str, fmt: Format | None = None) -> str:
    value: Any = row
    for key in path.split("."):
        value = value.get(key, "") if isinstance(value, Mapping) else ""
    if value is None or value == "":
        return ""
    return fmt(value) if fmt is not None else str(value)


def epoch_time(value: Any) -> str:
    """Seconds since the epoch (as the guest agent reports login times) as UTC ISO 8601;
    anything that is not a number is shown as it is."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return str(value)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _flatten(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(data, Mapping):
        out: list[tuple[str, Any]] = []
        for key, value in data.items():
            out += _flatten(value, f"{prefix}{key}.")
        return out
    return [(prefix.rstrip("."), data)]
