"""Frames: a 4-byte big-endian length, then exactly one msgpack map of that length.

Both sides enforce a maximum frame size before reading the body, so a hostile length
cannot make a peer allocate or wait for gigabytes, and decode bodies within `Limits`
(shared.wire.decode), so a small frame cannot become a large heap either.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Mapping
from typing import Any

import msgpack

from shared.wire.decode import Buffer, unpack
from shared.wire.errors import FrameTooLarge
from shared.wire.limits import Limits

HEADER = struct.Struct(">I")
DEFAULT_LIMITS = Limits()
DEFAULT_MAX_FRAME = DEFAULT_LIMITS.max_frame


def encode_frame(message: Mapping[str, Any], *, max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    """Serialise one message; refuses to produce a frame the peer would reject."""
    body: bytes = msgpack.packb(message, use_bin_type=True)
    if len(body) > max_frame:
        raise FrameTooLarge(len(body), max_frame)
    return HEADER.pack(len(body)) + body


def decode_body(body: Buffer, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Decode a frame body that must be a msgpack map with string keys, within ``limits``."""
    return unpack(body, limits)[0]


async def read_frame(
    reader: asyncio.StreamReader, *, limits: Limits = DEFAULT_LIMITS
) -> dict[str, Any] | None:
    """Read one frame from a stream (the client's side); None on a clean EOF between frames.

    Raises FrameTooLarge before reading an oversized body, LimitExceeded or
    ProtocolViolation on a bad body, and asyncio.IncompleteReadError when the peer hangs
    up mid-frame.
    """
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    (size,) = HEADER.unpack(header)
    if size > limits.max_frame:
        raise FrameTooLarge(size, limits.max_frame)
    return decode_body(await reader.readexactly(size), limits)
