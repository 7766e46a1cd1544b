"""Random values from an OpenAPI v3 schema (a CRD's `openAPIV3Schema`), deterministic from a
`random.Random`: pure functions, no I/O.

Most values are plausible (an enum's member, a short string, a small list) so objects get
past the API server's schema to our admission and daemons; a share are at the edges:
boundary strings (empty, 1, 63, 64, 253, 254 characters, unicode, control characters),
empty and huge lists, integers and quantities at their limits, absent required fields,
unknown fields, and wrong types (most where the schema is loose:
x-kubernetes-preserve-unknown-fields, x-kubernetes-int-or-string).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

BOUNDARY_STRINGS: tuple[str, ...] = (
    "",
    "a",
    "a" * 63,
    "a" * 64,
    "a" * 253,
    "a" * 254,
    "Ünïcødé-名前-🙂",
    "ctl\x00\x07\n\t\x1b[0m",
    "UPPER_case.with/slash",
    "-leading-dash",
    "../../etc/passwd",
    "  ",
)
QUANTITIES: tuple[str, ...] = (
    "0",
    "-1",
    "1e400",
    "9999999Ti",
    "1.5",
    "1Mi",
    "64Mi",
    "2",
    "0.0001m",
)
INTEGERS: tuple[int, ...] = (0, -1, 1, 2, 63, 64, 2**31 - 1, 2**31, 2**63 - 1, -(2**63), 2**64)
NUMBERS: tuple[float, ...] = (0.0, -1.5, 1.5, 1e308, -1e-308)
PLAIN_WORDS: tuple[str, ...] = ("x", "fz", "default", "disk0", "net1", "virtio", "1Gi", "true")
WRONG_TYPES: tuple[Any, ...] = ("s", 7, -3.25, True, None, [], {}, [1, "a"], {"k": [None]})
UNKNOWN_FIELD = "fuzzUnknownField"
HUGE_LIST = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class Knobs:
    """How wild the values are: probabilities per decision, and the depth limit."""

    edge: float = 0.15  # a boundary value instead of a plausible one
    wrong_type: float = 0.01  # a value of another type (loose schemas: ten times more)
    drop_required: float = 0.05
    unknown_field: float = 0.03
    null: float = 0.03  # None where the schema is nullable
    huge_list: float = 0.01
    max_depth: int = 12


def value(schema: Mapping[str, Any], rng: random.Random, *, knobs: Knobs, depth: int = 0) -> Any:
    """One value for `schema`."""
    loose = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or bool(
        schema.get("x-kubernetes-int-or-string")
    )
    if rng.random() < knobs.wrong_type * (10 if loose else 1):
        return rng.choice(WRONG_TYPES)
    if schema.get("nullable") and rng.random() < knobs.null:
        return None
    return typed(schema, rng, knobs=knobs, depth=depth)


def typed(schema: Mapping[str, Any], rng: random.Random, *, knobs: Knobs, depth: int) -> Any:
    """A value of the schema's own type."""
    if schema.get("x-kubernetes-int-or-string"):
        return int_or_string(rng, knobs=knobs)
    if "enum" in schema:
        return enum_value(schema["enum"], rng, knobs=knobs)
    kind = schema.get("type")
    if kind == "object" or "properties" in schema or "additionalProperties" in schema:
        return object_value(schema, rng, knobs=knobs, depth=depth)
    if kind == "array":
        return array_value(schema, rng, knobs=knobs, depth=depth)
    return scalar(str(kind or ""), rng, knobs=knobs)


def scalar(kind: str, rng: random.Random, *, knobs: Knobs) -> Any:
    """A string, integer, number or boolean; anything for an untyped schema."""
    edge = rng.random() < knobs.edge
    if kind == "string":
        return rng.choice(BOUNDARY_STRINGS + QUANTITIES) if edge else rng.choice(PLAIN_WORDS)
    if kind == "integer":
        return rng.choice(INTEGERS) if edge else rng.randint(0, 4)
    if kind == "number":
        return rng.choice(NUMBERS) if edge else rng.randint(0, 4) / 2
    if kind == "boolean":
        return rng.random() < 0.5
    return rng.choice(WRONG_TYPES)


def int_or_string(rng: random.Random, *, knobs: Knobs) -> Any:
    """An x-kubernetes-int-or-string: a quantity string or an integer, edges included."""
    if rng.random() < knobs.edge:
        return rng.choice(QUANTITIES + INTEGERS + BOUNDARY_STRINGS)
    return rng.choice(("1", "2", "64Mi", "100m", 1, 2))


def enum_value(members: list[Any], rng: random.Random, *, knobs: Knobs) -> Any:
    """A member, or (at the edge rate) a string that is none."""
    if rng.random() < knobs.edge:
        return rng.choice(("", "NotAMember", str(members[0]).lower()))
    return rng.choice(members)


def array_value(
    schema: Mapping[str, Any], rng: random.Random, *, knobs: Knobs, depth: int
) -> list[Any]:
    """Empty, short, or (rarely) huge: one item repeated `HUGE_LIST` times."""
    items = schema.get("items") or {}
    if depth >= knobs.max_depth:
        return []
    roll = rng.random()
    if roll < knobs.huge_list:
        return [value(items, rng, knobs=knobs, depth=depth + 1)] * HUGE_LIST
    if roll < knobs.huge_list + knobs.edge:
        return []
    return [value(items, rng, knobs=knobs, depth=depth + 1) for _ in range(rng.randint(1, 2))]


def object_value(
    schema: Mapping[str, Any], rng: random.Random, *, knobs: Knobs, depth: int
) -> dict[str, Any]:
    """Required properties (unless dropped), each optional one with a chance shrinking with
    depth, map entries for additionalProperties, and now and then an unknown field."""
    out: dict[str, Any] = {}
    if depth >= knobs.max_depth:
        return out
    required = set(schema.get("required") or ())
    chance = max(0.08, 0.6 - 0.07 * depth)
    for name, sub in (schema.get("properties") or {}).items():
        keep = rng.random() >= knobs.drop_required if name in required else rng.random() < chance
        if keep:
            out[name] = value(sub, rng, knobs=knobs, depth=depth + 1)
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping) and rng.random() < chance:
        for _ in range(rng.randint(1, 2)):
            key = rng.choice(BOUNDARY_STRINGS) if rng.random() < knobs.edge else "key"
            out[key] = value(extra, rng, knobs=knobs, depth=depth + 1)
    if rng.random() < knobs.unknown_field:
        out[UNKNOWN_FIELD] = rng.choice(WRONG_TYPES)
    return out
