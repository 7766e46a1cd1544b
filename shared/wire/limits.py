"""What one peer may make another hold: frame, decoded-size and buffer limits.

A msgpack byte can become a 72-byte Python object (an empty map), so the frame size alone
does not bound memory: the decoded size is bounded per frame (lengths, depth, object
count), and every frame's worst cost is charged to a per-connection and a per-server
budget before its body is read, so many connections cannot multiply it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MiB = 1024 * 1024

# Measured with tracemalloc on CPython 3.11: the dearest msgpack object, an empty map that
# is a map value (its dict plus the slot that holds it), costs 86 bytes; this is rounded up.
OBJECT_COST = 96
# A request's task, coroutine frames and reply, charged once per frame.
REQUEST_OVERHEAD = 4096
# The limits a peer must respect when it writes frames, listed by ``info``.
WIRE_LIMITS = (
    "max_frame",
    "max_str_len",
    "max_bin_len",
    "max_ext_len",
    "max_array_len",
    "max_map_len",
    "max_depth",
    "max_objects",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The limits one side enforces on what it reads; both sides default to the same.

    The names are the ones an error reply carries in ``details.limit``.
    """

    max_frame: int = 4 * MiB  # bytes of one frame body, checked on the header
    max_str_len: int = 1 * MiB  # bytes of one msgpack str
    max_bin_len: int = 1 * MiB  # bytes of one msgpack bin
    max_ext_len: int = 0  # the protocol has no ext types: any ext is refused
    max_array_len: int = 4096  # elements of one array
    max_map_len: int = 4096  # entries of one map
    max_depth: int = 32  # nested arrays/maps; the frame's own map is depth 1
    max_objects: int = 32768  # msgpack objects in one frame (keys and values count)
    connection_buffer: int = 12 * MiB  # worst-case cost of the frames a connection has open
    server_buffer: int = 24 * MiB  # the same, summed over every connection of a server
    max_connections: int = 256  # open connections per server; more are closed at once
    max_inflight: int = 64  # requests of one connection being served at once
    read_buffer: int = 16 * 1024  # per-connection buffer that headers and small frames use
    frame_timeout: float = 10.0  # seconds from a frame's header to its last byte
    budget_wait: float = 5.0  # seconds a frame may wait for buffer budget
    # Bodies this short cannot go over a length (but ext), depth or object limit.
    unmeasured_max: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        lengths = (self.max_str_len, self.max_bin_len, self.max_array_len, self.max_map_len)
        object.__setattr__(self, "unmeasured_max", min(self.max_depth, self.max_objects, *lengths))
        if self.connection_buffer < self.frame_cost(self.max_frame):
            raise ValueError("connection_buffer cannot hold one frame of max_frame bytes")
        if self.server_buffer < self.connection_buffer:
            raise ValueError("server_buffer is smaller than connection_buffer")
        if self.read_buffer < 64:
            raise ValueError("read_buffer must hold at least a header and a small frame")

    def frame_cost(self, size: int, objects: int | None = None) -> int:
        """Bytes a frame of ``size`` may cost while read, decoded and served.

        The body is held once as read and once more as decoded strings; every object
        costs OBJECT_COST. Without a count, the worst case: one object per byte.
        """
        count = min(size, self.max_objects) if objects is None else objects
        return 2 * size + count * OBJECT_COST + REQUEST_OVERHEAD

    def to_wire(self) -> dict[str, Any]:
        """The decoding limits, as ``info`` lists them (the names error details use)."""
        return {name: getattr(self, name) for name in WIRE_LIMITS}
