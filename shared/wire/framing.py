"""Frames: a 4-byte big-endian length, then exactly one msgpack map of that length.

Both sides enforce a maximum frame size before reading the body, so a hostile length
cannot make a peer allocate or wait for gigabytes.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Mapping
from typing import Any

import msgpack

from shared.wire.errors import ErrorCode, FrameTooLarge, ProtocolViolation

HEADER = struct.Struct(">I")
DEFAULT_MAX_FRAME = 4 * 1024 * 1024


def encode_frame(message: Mapping[str, Any], *, max_frame: int = DEFAULT_MAX_FRAME) -> bytes:
    """Serialise one message; refuses to produce a frame the peer would reject."""
    body: bytes = msgpack.packb(message, use_bin_type=True)
    if len(body) > max_frame:
        raise FrameTooLarge(len(body), max_frame)
    return HEADER.pack(len(body)) + body


def decode_body(body: bytes) -> dict[str, Any]:
    """Decode a frame body that must be a msgpack map with string keys."""
    try:
        message = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise ProtocolViolation(ErrorCode.BAD_FRAME, f"undecodable msgpack: {exc}") from exc
    if not isinstance(message, dict):
        raise ProtocolViolation(
            ErrorCode.BAD_FRAME, f"frame is a {type(message).__name__}, not a map"
        )
    return message


async def read_frame(reader: asyncio.StreamReader, *, max_frame: int) -> dict[str, Any] | None:
    """Read one frame; None on a clean EOF between frames.

    Raises FrameTooLarge before reading an oversized body, ProtocolViolation on a bad body,
    and asyncio.IncompleteReadError when the peer hangs up mid-frame.
    """
    try:
        header = await reader.readexactly(HEADER.size)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    (size,) = HEADER.unpack(header)
    if size > max_frame:
        raise FrameTooLarge(size, max_frame)
    return decode_body(await reader.readexactly(size))
