"""Bounded msgpack decoding: a frame is measured before any Python object is built.

msgpack-python bounds each str, bin, ext, array and map, but not the nesting depth nor
the number of objects, and one byte on the wire (an empty map) becomes ~72 bytes of
Python objects. `measure` walks the encoded bytes once, building none of the decoded
objects, and raises `LimitExceeded` naming the first limit a frame goes over; only then
does msgpack decode it, with the per-container limits passed again as a second guard.
"""

from __future__ import annotations

import mmap
from typing import Any

import msgpack

from shared.wire.errors import ErrorCode, LimitExceeded, ProtocolViolation
from shared.wire.limits import Limits

Buffer = bytes | bytearray | memoryview | mmap.mmap

# What a msgpack type byte announces: (kind, length-field bytes, fixed payload length).
_SCALAR, _STR, _BIN, _EXT, _ARRAY, _MAP = range(6)
_Entry = tuple[int, int, int]


def _type_table() -> tuple[_Entry | None, ...]:
    table: list[_Entry | None] = [None] * 256  # 0xc1 stays None: never used
    for b in (*range(0x00, 0x80), 0xC0, 0xC2, 0xC3, *range(0xE0, 0x100)):
        table[b] = (_SCALAR, 0, 0)  # fixints, nil, booleans
    for b in range(0x80, 0x90):
        table[b] = (_MAP, 0, b & 0x0F)
    for b in range(0x90, 0xA0):
        table[b] = (_ARRAY, 0, b & 0x0F)
    for b in range(0xA0, 0xC0):
        table[b] = (_STR, 0, b & 0x1F)
    for i, b in enumerate((0xCC, 0xCD, 0xCE, 0xCF)):
        table[b] = table[b + 4] = (_SCALAR, 0, 1 << i)  # uint8..64, int8..64
    table[0xCA], table[0xCB] = (_SCALAR, 0, 4), (_SCALAR, 0, 8)
    for i, b in enumerate(range(0xD4, 0xD9)):
        table[b] = (_EXT, 0, 1 << i)  # fixext 1..16
    for kind, first in ((_BIN, 0xC4), (_EXT, 0xC7), (_STR, 0xD9)):
        for i, width in enumerate((1, 2, 4)):
            table[first + i] = (kind, width, 0)
    for kind, first in ((_ARRAY, 0xDC), (_MAP, 0xDE)):
        table[first], table[first + 1] = (kind, 2, 0), (kind, 4, 0)
    return tuple(table)


_TYPES = _type_table()
_LENGTH_LIMITS = {
    _STR: "max_str_len",
    _BIN: "max_bin_len",
    _EXT: "max_ext_len",
    _ARRAY: "max_array_len",
    _MAP: "max_map_len",
}


def _truncated() -> ProtocolViolation:
    return ProtocolViolation(ErrorCode.BAD_FRAME, "undecodable msgpack: truncated body")


def _finished(objects: int, pos: int, end: int) -> int:
    if pos > end:
        raise _truncated()
    if pos < end:
        raise ProtocolViolation(ErrorCode.BAD_FRAME, "extra bytes after the message")
    return objects


def _bad_type(pos: int, end: int) -> ProtocolViolation:
    return (
        _truncated()
        if pos >= end
        else ProtocolViolation(ErrorCode.BAD_FRAME, "undecodable msgpack: type byte 0xc1")
    )


def measure(body: Buffer, limits: Limits) -> int:
    """The number of msgpack objects in ``body``, which must hold exactly one object.

    Raises LimitExceeded for the first limit the body goes over and ProtocolViolation
    (bad_frame) for bytes that are not one msgpack object. Cost: one step per object,
    and never more than ``limits.max_objects`` steps.
    """
    if isinstance(body, bytes | bytearray):
        return _walk(body, limits)
    with memoryview(body) as view, view.cast("B") as data:  # released even on a refusal
        return _walk(data, limits)


def _walk(data: bytes | bytearray | memoryview, limits: Limits) -> int:
    """measure's loop, kept flat: it is the price every measured frame pays."""
    end, pos, objects = len(data), 0, 0
    depth_stack: list[int] = []  # what is left of each enclosing container
    remaining = 1  # objects still to read in the innermost open container
    max_objects, max_depth = limits.max_objects, limits.max_depth
    length_max = (  # indexed by kind
        0,
        limits.max_str_len,
        limits.max_bin_len,
        limits.max_ext_len,
        limits.max_array_len,
        limits.max_map_len,
    )
    while True:
        while remaining == 0:
            if not depth_stack:
                return _finished(objects, pos, end)
            remaining = depth_stack.pop()
        remaining -= 1
        objects += 1
        if objects > max_objects:
            raise LimitExceeded("max_objects", objects, max_objects)
        entry = _TYPES[data[pos]] if pos < end else None
        if entry is None:
            raise _bad_type(pos, end)
        kind, width, size = entry
        pos += 1 + width
        if width:
            size = int.from_bytes(data[pos - width : pos], "big")
        if kind == _SCALAR:
            pos += size  # overruns are caught by the next object or by _finished
            continue
        size += kind == _EXT  # its type byte, which msgpack's max_ext_len counts too
        if size > length_max[kind]:
            name = _LENGTH_LIMITS[kind]
            raise _truncated() if pos > end else LimitExceeded(name, size, length_max[kind])
        if kind < _ARRAY:  # str, bin, ext: a payload
            pos += size
            continue
        if len(depth_stack) >= max_depth:
            raise LimitExceeded("max_depth", len(depth_stack) + 1, max_depth)
        depth_stack.append(remaining)
        remaining = 2 * size if kind == _MAP else size


def unpack(body: Buffer, limits: Limits) -> tuple[dict[str, Any], int]:
    """Decode a frame body that must be one msgpack map with string keys.

    Returns the map and its object count. A body no longer than every length, depth and
    object limit can only go over ``max_ext_len``, which msgpack checks, so msgpack
    decodes it without measuring first, and its length stands in for the count.
    """
    if len(body) <= limits.unmeasured_max:
        objects = len(body)
        try:
            message = msgpack.unpackb(
                body,
                raw=False,
                strict_map_key=True,
                max_ext_len=limits.max_ext_len,
                ext_hook=_refuse_ext if limits.max_ext_len == 0 else msgpack.ExtType,
            )
        except Exception as exc:  # msgpack raises several unrelated types for bad input
            measure(body, limits)  # names the limit, if one was the trouble
            raise _undecodable(exc) from exc
    else:
        objects = measure(body, limits)
        message = _unpackb(body, limits)
    if not isinstance(message, dict):
        raise ProtocolViolation(
            ErrorCode.BAD_FRAME, f"frame is a {type(message).__name__}, not a map"
        )
    return message, objects


_MAP_HEADER = {0xDE: 3, 0xDF: 5} | {b: 1 for b in range(0x80, 0x90)}
_INT_WIDTH = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8, 0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}


def peek_id(body: Buffer) -> int | None:
    """The request id of a refused frame, when the frame starts ``{"id": <int>`` as every
    client writes it; so the refusal reaches the caller waiting for that id."""
    head = bytes(memoryview(body)[:16])
    pos = _MAP_HEADER.get(head[0], 0) if head else 0
    if not pos or head[pos : pos + 3] != b"\xa2id" or len(head) <= pos + 3:
        return None
    pos += 3
    first = head[pos]
    if first < 0x80 or first >= 0xE0:
        return first if first < 0x80 else first - 0x100  # fixints
    width = _INT_WIDTH.get(first, 0)
    value = head[pos + 1 : pos + 1 + width]
    if not width or len(value) < width:
        return None
    return int.from_bytes(value, "big", signed=first >= 0xD0)


def _refuse_ext(_code: int, _data: bytes) -> Any:
    raise ValueError("ext values are refused")  # even empty ones, which max_ext_len lets by


def _unpackb(body: Buffer, limits: Limits) -> Any:
    try:
        return msgpack.unpackb(
            body,
            raw=False,
            strict_map_key=True,
            max_str_len=limits.max_str_len,
            max_bin_len=limits.max_bin_len,
            max_ext_len=limits.max_ext_len,
            max_array_len=limits.max_array_len,
            max_map_len=limits.max_map_len,
        )
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise _undecodable(exc) from exc


def _undecodable(exc: Exception) -> ProtocolViolation:
    return ProtocolViolation(ErrorCode.BAD_FRAME, f"undecodable msgpack: {exc}")
