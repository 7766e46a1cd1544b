"""Bounded decoding: every limit is named when a body goes over it, and nothing else is refused."""

from __future__ import annotations

import random
from typing import Any

import msgpack
import pytest

from shared.wire.decode import measure, peek_id, unpack
from shared.wire.errors import (
    MAX_ERROR_TEXT,
    ErrorCode,
    InvalidArgument,
    LimitExceeded,
    ProtocolViolation,
)
from shared.wire.limits import Limits

SMALL = Limits(
    max_str_len=40,
    max_bin_len=40,
    max_ext_len=8,
    max_array_len=40,
    max_map_len=40,
    max_depth=4,
    max_objects=200,
)


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth - 1):
        value = [value]
    return {"v": value}


# (body, the limit it goes over, the value the refusal reports)
OVER = [
    pytest.param(_pack({"s": "x" * 41}), "max_str_len", 41, id="str"),
    pytest.param(_pack({"s" * 41: 1}), "max_str_len", 41, id="str-key"),
    pytest.param(_pack({"b": b"x" * 41}), "max_bin_len", 41, id="bin"),
    pytest.param(_pack({"e": msgpack.ExtType(1, b"x" * 8)}), "max_ext_len", 9, id="ext"),
    pytest.param(_pack({"a": list(range(41))}), "max_array_len", 41, id="array"),
    pytest.param(_pack({"m": {str(i): 0 for i in range(41)}}), "max_map_len", 41, id="map"),
    pytest.param(_pack(_nested(5)), "max_depth", 5, id="depth"),
    pytest.param(_pack({"a": [[0] * 40] * 5}), "max_objects", 201, id="objects"),
    pytest.param(b"\xdd\xff\xff\xff\xff", "max_array_len", 2**32 - 1, id="huge-array-header"),
    pytest.param(b"\x91" * 10_000 + b"\xc0", "max_depth", 5, id="deep-bytes"),
]


@pytest.mark.parametrize(("body", "limit", "value"), OVER)
def test_each_limit_is_named(body: bytes, limit: str, value: int) -> None:
    """A body over one limit is refused with LimitExceeded naming that limit and the value."""
    with pytest.raises(LimitExceeded) as info:
        unpack(body, SMALL)
    assert (info.value.limit, info.value.value) == (limit, value)
    assert info.value.code == ErrorCode.LIMIT_EXCEEDED
    assert info.value.details == {"limit": limit, "value": value, "max": getattr(SMALL, limit)}


@pytest.mark.parametrize(
    ("body", "limit"),
    [
        pytest.param(_pack({"e": msgpack.ExtType(1, b"")}), "max_ext_len", id="empty-ext"),
        pytest.param(_pack({"e": msgpack.Timestamp(1)}), "max_ext_len", id="timestamp"),
        pytest.param(_pack(_nested(33)), "max_depth", id="depth"),
        pytest.param(_pack({"a": [{}] * 4096, "b": [{}] * 4096}), "max_objects", id="objects"),
    ],
)
def test_default_limits(body: bytes, limit: str) -> None:
    """With the default limits, no ext value passes (short frames included), nor a 33rd
    level, nor more than max_objects objects."""
    with pytest.raises(LimitExceeded) as info:
        unpack(body, Limits(max_objects=8000))
    assert info.value.limit == limit


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"s": "x" * 40, "b": b"y" * 40}, id="lengths-at-limit"),
        pytest.param({"a": list(range(40)), "m": {str(i): i for i in range(39)}}, id="sizes"),
        pytest.param(_nested(4), id="depth-at-limit"),
        pytest.param({"e": msgpack.ExtType(1, b"x" * 7)}, id="ext-at-limit"),
        pytest.param({"n": [None, True, False, -1, 2**64 - 1, -(2**63), 1.5]}, id="scalars"),
    ],
)
def test_values_within_limits_decode_as_msgpack_does(value: Any) -> None:
    """Whatever is within every limit decodes to what msgpack itself decodes."""
    body = _pack(value)
    message, objects = unpack(body, SMALL)
    assert message == msgpack.unpackb(body, raw=False)
    assert objects <= len(body)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(_pack([1, 2]), id="not-a-map"),
        pytest.param(_pack({1: 2}), id="int-key"),
        pytest.param(b"\xc1", id="never-used-byte"),
        pytest.param(_pack({"a": 1}) + b"\x00", id="extra-bytes"),
        pytest.param(_pack({"a": "x" * 100})[:-1], id="truncated-long"),
        pytest.param(_pack({"a": 1})[:-1], id="truncated-short"),
        pytest.param(b"", id="empty"),
        pytest.param(b"\x81\xa1a\xda\x00", id="cut-length-field"),
    ],
)
def test_malformed_bodies_are_bad_frames(body: bytes) -> None:
    """Bytes that are not one map with string keys are bad_frame, not a limit."""
    with pytest.raises(ProtocolViolation) as info:
        unpack(body, Limits())
    assert not isinstance(info.value, LimitExceeded)
    assert info.value.code == ErrorCode.BAD_FRAME


def test_every_cut_of_a_frame_is_refused() -> None:
    """A frame cut anywhere short of its end is refused as bad_frame."""
    body = _pack({"id": 7, "method": "sync", "args": {"vmi": {"a": ["x" * 50, 1.5, b"b"]}}})
    for cut in range(len(body)):
        with pytest.raises(ProtocolViolation) as info:
            unpack(body[:cut], Limits())
        assert info.value.code == ErrorCode.BAD_FRAME, cut


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    scalars = [
        rng.choice([None, True, False]),
        rng.randint(-(2**63), 2**64 - 1) if rng.random() < 0.5 else rng.randint(-40, 200),
        rng.random() * 10 ** rng.randint(-5, 300),
        "é" * rng.randint(0, 300),
        rng.randbytes(rng.randint(0, 70_000) if rng.random() < 0.1 else 5),
    ]
    kind = rng.randrange(7 if depth < 5 else 5)
    if kind < len(scalars):
        return scalars[kind]
    if kind == 5:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 20))]
    return {str(i): _random_value(rng, depth + 1) for i in range(rng.randint(0, 20))}


def test_measure_counts_what_msgpack_decodes() -> None:
    """On random values, measure counts every object (keys included) and the decode equals
    msgpack's own."""

    def count(value: Any) -> int:
        if isinstance(value, list):
            return 1 + sum(count(v) for v in value)
        if isinstance(value, dict):
            return 1 + sum(1 + count(v) for v in value.values())
        return 1

    rng = random.Random(12)
    limits = Limits(max_objects=32768)
    for _ in range(300):
        value = {"v": _random_value(rng)}
        body = _pack(value)
        assert measure(body, limits) == count(value)
        assert unpack(body, limits)[0] == msgpack.unpackb(body, raw=False)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(_pack({"id": 7, "method": "x"}), 7, id="fixint"),
        pytest.param(_pack({"id": 70000, "x": [1] * 9000}), 70000, id="uint32"),
        pytest.param(_pack({"id": -3}), -3, id="negative"),
        pytest.param(_pack({"id": -300}), -300, id="int16"),
        pytest.param(_pack({"method": "x", "id": 7}), None, id="id-not-first"),
        pytest.param(_pack({"id": "7"}), None, id="string-id"),
        pytest.param(b"\x81\xa2id\xcd\x01", None, id="cut"),
        pytest.param(b"", None, id="empty"),
        pytest.param(b"\x91\x01", None, id="array"),
    ],
)
def test_peek_id(body: bytes, expected: int | None) -> None:
    """A refused frame's request id is read from its first key when it is "id"."""
    assert peek_id(body) == expected


def test_limits_must_hold_one_frame() -> None:
    """Budgets smaller than one frame's worst cost are refused when the limits are made."""
    with pytest.raises(ValueError, match="connection_buffer"):
        Limits(max_frame=8 << 20)
    with pytest.raises(ValueError, match="server_buffer"):
        Limits(server_buffer=Limits().connection_buffer - 1)


def test_error_texts_are_clipped_on_the_wire() -> None:
    """An error never echoes a huge input back: message and string details are clipped."""
    wire = InvalidArgument("k" * 100_000, "unexpected").to_wire()
    assert len(wire["message"]) == MAX_ERROR_TEXT
    assert len(wire["details"]["field"]) == MAX_ERROR_TEXT
