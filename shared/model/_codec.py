"""The one place that maps model dataclasses to and from Kubernetes wire dicts.

Every model class is a frozen, slotted, keyword-only dataclass deriving from `Model`.
Its fields are read from the class annotations once and turned into a plan of codecs,
so `from_dict`/`to_dict` are explicit per class without hand-written copy-paste.

Round-trip invariant: `X.from_dict(d).to_dict() == d` for every well-typed `d`.
- A typed field renders iff it differs from its default (None, empty, or empty object).
- Keys the model does not type are kept in `extra` and merged back on render.
- A key present on the wire whose value the typed field cannot distinguish from "absent"
  (explicit null, `[]`, `{}`) is kept in `extra` too, so key presence survives.
- Typed fields win over `extra` when both name the same key (after `dataclasses.replace`).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Protocol, Self

from shared.model.errors import ParseError

JSON_KEY = "json"


def json_name(name: str) -> dict[str, str]:
    """Field metadata overriding the camelCase wire name (e.g. `guestOSInfo`)."""
    return {JSON_KEY: name}


def snake_to_camel(name: str) -> str:
    """`termination_grace_period_seconds` → `terminationGracePeriodSeconds`."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def wire_key(f: dataclasses.Field[Any]) -> str:
    """The wire (JSON) key of a dataclass field."""
    return str(f.metadata.get(JSON_KEY) or snake_to_camel(f.name))


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON-like value (dicts, lists, scalars); faster than deepcopy."""
    if isinstance(value, Mapping):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [copy_json(v) for v in value]
    return value


class Codec(Protocol):
    """Decodes one wire value at a path, encodes it back, and describes its schema."""

    def decode(self, raw: Any, path: str) -> Any: ...

    def encode(self, value: Any) -> Any: ...

    def schema(self) -> dict[str, Any]: ...


def _type_name(raw: Any) -> str:
    return "null" if raw is None else type(raw).__name__


@dataclasses.dataclass(frozen=True, slots=True)
class ScalarCodec:
    """str, int or bool; bools are never accepted as ints."""

    kind: type

    def decode(self, raw: Any, path: str) -> Any:
        if isinstance(raw, self.kind) and not (self.kind is int and isinstance(raw, bool)):
            return raw
        raise ParseError(path, f"expected {self.kind.__name__}, got {_type_name(raw)}")

    def encode(self, value: Any) -> Any:
        return value

    def schema(self) -> dict[str, Any]:
        names = {str: "string", int: "integer", bool: "boolean"}
        return {"type": names[self.kind]}


@dataclasses.dataclass(frozen=True, slots=True)
class IntOrStringCodec:
    """Kubernetes int-or-string (quantities): kept exactly as given on the wire."""

    def decode(self, raw: Any, path: str) -> Any:
        if isinstance(raw, str | int) and not isinstance(raw, bool):
            return raw
        raise ParseError(path, f"expected integer or string, got {_type_name(raw)}")

    def encode(self, value: Any) -> Any:
        return value

    def schema(self) -> dict[str, Any]:
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class EnumCodec:
    """A StrEnum; `open_set` keeps unknown values as plain strings (condition types)."""

    enum_cls: type[enum.StrEnum]
    open_set: bool = False

    def decode(self, raw: Any, path: str) -> Any:
        if not isinstance(raw, str):
            raise ParseError(path, f"expected string, got {_type_name(raw)}")
        try:
            return self.enum_cls(raw)
        except ValueError:
            if self.open_set:
                return raw
            allowed = ", ".join(repr(m.value) for m in self.enum_cls)
            raise ParseError(path, f"unknown value {raw!r}, expected one of {allowed}") from None

    def encode(self, value: Any) -> Any:
        return str(value)

    def schema(self) -> dict[str, Any]:
        if self.open_set:
            return {"type": "string"}
        return {"type": "string", "enum": [m.value for m in self.enum_cls]}


@dataclasses.dataclass(frozen=True, slots=True)
class ListCodec:
    """A JSON array as a tuple."""

    item: Codec

    def decode(self, raw: Any, path: str) -> Any:
        if not isinstance(raw, list | tuple):
            raise ParseError(path, f"expected list, got {_type_name(raw)}")
        return tuple(self.item.decode(v, f"{path}[{i}]") for i, v in enumerate(raw))

    def encode(self, value: Any) -> Any:
        return [self.item.encode(v) for v in value]

    def schema(self) -> dict[str, Any]:
        return {"type": "array", "items": self.item.schema()}


@dataclasses.dataclass(frozen=True, slots=True)
class MapCodec:
    """A JSON object with arbitrary string keys (labels, nodeSelector, activePods)."""

    value: Codec

    def decode(self, raw: Any, path: str) -> Any:
        if not isinstance(raw, Mapping):
            raise ParseError(path, f"expected object, got {_type_name(raw)}")
        return {str(k): self.value.decode(v, f"{path}[{k}]") for k, v in raw.items()}

    def encode(self, value: Any) -> Any:
        return {k: self.value.encode(v) for k, v in value.items()}

    def schema(self) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": self.value.schema()}


@dataclasses.dataclass(frozen=True, slots=True)
class ModelCodec:
    """A nested model object."""

    cls: type[Model]

    def decode(self, raw: Any, path: str) -> Any:
        return self.cls.from_dict_at(raw, path)

    def encode(self, value: Any) -> Any:
        return value.to_dict()

    def schema(self) -> dict[str, Any]:
        return self.cls.openapi_schema()


@dataclasses.dataclass(frozen=True, slots=True)
class FieldPlan:
    """How one dataclass field maps to one wire key."""

    attr: str
    key: str
    codec: Codec
    default: Any
    is_empty: Callable[[Any], bool]


def _union_codec(args: tuple[Any, ...]) -> Codec | None:
    """int-or-string, or an open StrEnum (`E | str`)."""
    members = set(args)
    if members == {str, int}:
        return IntOrStringCodec()
    enums = [a for a in args if isinstance(a, type) and issubclass(a, enum.StrEnum)]
    if len(enums) == 1 and members == {enums[0], str}:
        return EnumCodec(enums[0], open_set=True)
    return None


def _codec_for(tp: Any) -> Codec:
    """The codec of a (None-stripped) annotation."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    codec: Codec | None = None
    if origin in (typing.Union, types.UnionType):
        codec = _union_codec(args)
    elif origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        codec = ListCodec(_codec_for(args[0]))
    elif origin in (Mapping, dict) and args and args[0] is str:
        codec = MapCodec(_codec_for(args[1]))
    elif isinstance(tp, type) and issubclass(tp, enum.StrEnum):
        codec = EnumCodec(tp)
    elif tp in (str, int, bool):
        codec = ScalarCodec(tp)
    elif isinstance(tp, type) and issubclass(tp, Model):
        codec = ModelCodec(tp)
    if codec is None:
        raise TypeError(f"model annotation not supported: {tp!r}")
    return codec


def _strip_none(tp: Any) -> Any:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        rest = tuple(a for a in args if a is not type(None))
        return rest[0] if len(rest) == 1 else functools.reduce(lambda a, b: a | b, rest)
    return tp


def _default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise TypeError(f"model field {f.name} needs a default")


def _emptiness(default: Any) -> Callable[[Any], bool]:
    if default is None:
        return lambda v: v is None
    if isinstance(default, tuple | Mapping):
        return lambda v: not v
    return lambda v: v is None or v == default


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """The field plans of one model class, in declaration order and by wire key."""

    fields: tuple[FieldPlan, ...]
    by_key: dict[str, FieldPlan]


_PLAN_ATTR = "_model_plan"


def plan_of(cls: type[Model]) -> Plan:
    """The plan of a model class, computed on first use and kept on the class itself."""
    plan = cls.__dict__.get(_PLAN_ATTR)
    if isinstance(plan, Plan):
        return plan
    hints = typing.get_type_hints(cls)
    plans = []
    for f in dataclasses.fields(cls):
        if f.name == "extra":
            continue
        default = _default_of(f)
        codec = _codec_for(_strip_none(hints[f.name]))
        plans.append(FieldPlan(f.name, wire_key(f), codec, default, _emptiness(default)))
    plan = Plan(tuple(plans), {p.key: p for p in plans})
    setattr(cls, _PLAN_ATTR, plan)
    return plan


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Model:
    """Base of every wire model: `extra` holds the keys the model does not type."""

    # Keys on the wire the model does not type, plus present-but-empty typed keys.
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        """Parse a Kubernetes wire dict; raises ParseError with the JSON path."""
        return cls.from_dict_at(d, "")

    @classmethod
    def from_dict_at(cls, d: Any, path: str) -> Self:
        """Parse `d` found at JSON `path` (used for nested objects)."""
        if not isinstance(d, Mapping):
            raise ParseError(path, f"expected object, got {_type_name(d)}")
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        by_key = plan_of(cls).by_key
        for key, raw in d.items():
            fp = by_key.get(key)
            if fp is None or raw is None:
                extra[key] = copy_json(raw)
                continue
            value = fp.codec.decode(raw, f"{path}.{key}" if path else key)
            if fp.is_empty(value):
                extra[key] = copy_json(raw)
            else:
                kwargs[fp.attr] = value
        return cls(extra=extra, **kwargs)

    def to_dict(self) -> dict[str, Any]:
        """Render to a Kubernetes wire dict (camelCase, omitted fields omitted)."""
        out: dict[str, Any] = {k: copy_json(v) for k, v in self.extra.items()}
        for fp in plan_of(type(self)).fields:
            value = getattr(self, fp.attr)
            if not fp.is_empty(value):
                out[fp.key] = fp.codec.encode(value)
        return out

    @classmethod
    def openapi_schema(cls) -> dict[str, Any]:
        """The structural OpenAPI v3 schema of this model (used for the CRDs)."""
        props = {fp.key: {**fp.codec.schema(), "nullable": True} for fp in plan_of(cls).fields}
        schema: dict[str, Any] = {"type": "object"}
        doc = (cls.__doc__ or "").strip()
        if doc:
            schema = {"description": doc.splitlines()[0], **schema}
        if props:
            schema["properties"] = props
        # The model keeps unknown keys in `extra`; the API server must keep them too.
        schema["x-kubernetes-preserve-unknown-fields"] = True
        return schema
