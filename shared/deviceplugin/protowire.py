"""The protobuf wire format, the part the device-plugin messages use: varints,
length-delimited fields, proto3 defaults omitted on encode, unknown fields skipped on decode.

Messages are frozen dataclasses whose fields carry their protobuf number and kind in the
dataclass field metadata (`pb(1, Kind.STRING)`); `encode` and `decode` walk those fields,
so no message has hand-written (de)serialisation code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from enum import Enum, auto
from typing import Any, Protocol, Self, TypeVar

from shared.deviceplugin.errors import DecodeError

VARINT, I64, LEN, I32 = 0, 1, 2, 5
MAX_MESSAGE = 4 * 1024 * 1024  # gRPC's default receive limit
M = TypeVar("M")


class Kind(Enum):
    STRING = auto()
    BOOL = auto()
    INT = auto()  # int32 / int64 (negative numbers as ten-byte two's complement varints)
    MESSAGE = auto()
    REPEATED_STRING = auto()
    REPEATED_MESSAGE = auto()
    STRING_MAP = auto()  # map<string, string>: repeated entries {1: key, 2: value}


@dataclasses.dataclass(frozen=True, slots=True)
class FieldSpec:
    number: int
    kind: Kind
    message: type[Any] | None = None  # the nested dataclass of MESSAGE / REPEATED_MESSAGE


def pb(number: int, kind: Kind, message: type[Any] | None = None) -> dict[str, FieldSpec]:
    """Field metadata: ``x: str = field(default="", metadata=pb(1, Kind.STRING))``."""
    return {"pb": FieldSpec(number, kind, message)}


class Message(Protocol):
    """A dataclass whose fields carry `pb` metadata."""

    __dataclass_fields__: dict[str, dataclasses.Field[Any]]


class MessageBase:
    """encode()/decode() for message dataclasses (their fields carry `pb` metadata)."""

    __slots__ = ()

    def encode(self) -> bytes:
        return encode(self)  # type: ignore[arg-type]

    @classmethod
    def decode(cls, data: bytes) -> Self:
        return decode(cls, data)


# -- encoding ------------------------------------------------------------------------------


def varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def _len_field(number: int, payload: bytes) -> bytes:
    return _tag(number, LEN) + varint(len(payload)) + payload


def encode(message: Message) -> bytes:
    """The message's bytes; fields at their proto3 default are left out."""
    out = bytearray()
    for f in dataclasses.fields(message):  # type: ignore[arg-type]
        spec: FieldSpec = f.metadata["pb"]
        value = getattr(message, f.name)
        out += _encode_field(spec, value)
    return bytes(out)


_ENCODERS: dict[Kind, Callable[[int, Any], bytes]] = {
    Kind.STRING: lambda n, v: _len_field(n, v.encode()) if v else b"",
    Kind.BOOL: lambda n, v: _tag(n, VARINT) + b"\x01" if v else b"",
    Kind.INT: lambda n, v: _tag(n, VARINT) + varint(v) if v else b"",
    Kind.MESSAGE: lambda n, v: _len_field(n, encode(v)) if v is not None else b"",
    Kind.REPEATED_STRING: lambda n, v: b"".join(_len_field(n, s.encode()) for s in v),
    Kind.REPEATED_MESSAGE: lambda n, v: b"".join(_len_field(n, encode(m)) for m in v),
    Kind.STRING_MAP: lambda n, v: b"".join(
        _len_field(n, _len_field(1, k.encode()) + _len_field(2, x.encode()))
        for k, x in sorted(v.items())
    ),
}


def _encode_field(spec: FieldSpec, value: Any) -> bytes:
    return _ENCODERS[spec.kind](spec.number, value)


# -- decoding ------------------------------------------------------------------------------


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise DecodeError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise DecodeError("varint longer than 10 bytes")


def fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for each field: ints for varints, bytes otherwise."""
    if len(data) > MAX_MESSAGE:
        raise DecodeError(f"message of {len(data)} bytes exceeds {MAX_MESSAGE}")
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise DecodeError("field number 0")
        value: int | bytes
        if wire == VARINT:
            value, pos = _read_varint(data, pos)
        elif wire == LEN:
            size, pos = _read_varint(data, pos)
            if pos + size > len(data):
                raise DecodeError(f"field {number}: {size} bytes announced, fewer left")
            value, pos = data[pos : pos + size], pos + size
        elif wire in (I64, I32):
            width = 8 if wire == I64 else 4
            if pos + width > len(data):
                raise DecodeError(f"field {number}: truncated fixed-width value")
            value, pos = data[pos : pos + width], pos + width
        else:
            raise DecodeError(f"field {number}: unsupported wire type {wire}")
        yield number, wire, value


def decode(cls: type[M], data: bytes) -> M:
    """A `cls` from its bytes; absent fields keep their defaults, unknown ones are skipped."""
    specs = {f.metadata["pb"].number: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for number, wire, raw in fields(data):
        f = specs.get(number)
        if f is None:
            continue
        spec: FieldSpec = f.metadata["pb"]
        values[f.name] = _decode_field(spec, wire, raw, values.get(f.name), where=f.name)
    return cls(**values)


def _decode_field(spec: FieldSpec, wire: int, raw: int | bytes, prior: Any, *, where: str) -> Any:
    if spec.kind in (Kind.BOOL, Kind.INT):
        if not isinstance(raw, int) or wire != VARINT:
            raise DecodeError(f"{where}: expected a varint")
        return _scalar(spec.kind, raw)
    if not isinstance(raw, bytes) or wire != LEN:
        raise DecodeError(f"{where}: expected a length-delimited field")
    if spec.kind is Kind.STRING:
        return _text(raw, where)
    if spec.kind is Kind.MESSAGE:
        return decode(_nested(spec), raw)
    if spec.kind is Kind.REPEATED_STRING:
        return (*(prior or ()), _text(raw, where))
    if spec.kind is Kind.REPEATED_MESSAGE:
        return (*(prior or ()), decode(_nested(spec), raw))
    return {**(prior or {}), **_map_entry(raw, where)}


def _scalar(kind: Kind, raw: int) -> bool | int:
    if kind is Kind.BOOL:
        return bool(raw)
    return raw - (1 << 64) if raw >= 1 << 63 else raw  # two's complement of negatives


def _map_entry(raw: bytes, where: str) -> dict[str, str]:
    entry = {n: v for n, _, v in fields(raw)}
    key, value = entry.get(1, b""), entry.get(2, b"")
    if not isinstance(key, bytes) or not isinstance(value, bytes):
        raise DecodeError(f"{where}: a map entry must hold strings")
    return {_text(key, where): _text(value, where)}


def _nested(spec: FieldSpec) -> type[Any]:
    assert spec.message is not None, "MESSAGE fields name their dataclass"
    return spec.message


def _text(raw: bytes, where: str) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise DecodeError(f"{where}: not UTF-8") from exc
