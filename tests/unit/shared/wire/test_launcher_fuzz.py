"""A launcher command server in its own process keeps its memory bounded under hostile frames.

Bounded size, not speed: the server is the real RpcServer with the launcher's command
table (tests/unit/shared/wire/launcher_server.py); the test measures its resident memory when
idle, resets the kernel's high-water mark, sends a fixed, seeded mix of frames on several
connections at once (huge arrays and maps of empty values, deep nesting, long strings,
ext values, garbage, truncated and oversized frames, valid pings in between), and then
reads the high-water mark.
"""

from __future__ import annotations

import asyncio
import os
import random
import struct
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import pytest

from shared.wire.client import RpcClient, Tier
from shared.wire.framing import read_frame
from shared.wire.limits import Limits, MiB

REPO = Path(__file__).resolve().parents[4]
LIMITS = Limits()
MAX = LIMITS.max_frame
WORKERS = 8
ROUNDS = 2
RSS_HEADROOM = 64 * MiB
BUDGETS = ("server_buffer", "connection_buffer")  # named when a frame waited too long


def _frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


def _request(rid: int, args: Any = None, method: str = "ping") -> bytes:
    return msgpack.packb({"id": rid, "method": method, "args": args or {}}, use_bin_type=True)


def _in_request(rid: int, raw_value: bytes) -> bytes:
    """``{id, method: sync, args: {vmi: <raw_value>}}`` around an already encoded value."""
    head = msgpack.packb({"id": rid, "method": "sync"})[1:]  # the two pairs, no map header
    return b"\x83" + head + msgpack.packb("args") + b"\x81" + msgpack.packb("vmi") + raw_value


def _wide_maps(count: int) -> bytes:
    """An array of ``count`` maps of 4096 distinct keys, each mapped to an empty map."""
    one = b"\xde\x10\x00" + b"".join(msgpack.packb(f"{i:03x}") + b"\x80" for i in range(4096))
    return b"\xdc" + struct.pack(">H", count) + one * count


@dataclass(frozen=True, slots=True)
class Attack:
    """A frame the server must refuse, answering request ``rid``, and stay in sync after."""

    name: str
    rid: int | None  # None: garbage that carries no request id
    body: bytes
    limits: tuple[str, ...]  # the limit the refusal may name; () for any error


def in_sync_attacks(rng: random.Random) -> list[Attack]:
    arrays = b"\xdc\x03\xe8"  # an array of 1000 arrays of 4096 ...
    inner = b"\xdc\x10\x00"
    return [
        Attack("flat-empty-maps", 1, _in_request(1, b"\xdd" + struct.pack(">I", MAX - 64) + b"\x80" * (MAX - 64)),
               ("max_array_len",)),
        Attack("nested-empty-maps", 2, _in_request(2, arrays + (inner + b"\x80" * 4096) * 1000),
               ("max_objects",)),
        Attack("nested-empty-arrays", 3, _in_request(3, arrays + (inner + b"\x90" * 4096) * 1000),
               ("max_objects",)),
        Attack("wide-maps", 4, _in_request(4, _wide_maps(200)), ("max_objects",)),
        Attack("short-strings", 5, _in_request(5, arrays[:1] + b"\x01\x2c" + (inner + b"\xa2ab" * 4096) * 300),
               ("max_objects",)),
        Attack("deep", 6, _in_request(6, b"\x91" * (MAX - 64) + b"\xc0"), ("max_depth",)),
        Attack("deep-and-short", 7, _in_request(7, b"\x91" * 100 + b"\xc0"), ("max_depth",)),
        Attack("long-str", 8, _request(8, {"a": "x" * (2 * MiB)}), ("max_str_len",)),
        Attack("long-bin", 9, _request(9, {"a": b"x" * (2 * MiB)}), ("max_bin_len",)),
        Attack("ext", 10, _in_request(10, msgpack.packb(msgpack.ExtType(5, b"e" * 64))),
               ("max_ext_len",)),
        Attack("strings-at-limit", 11, _request(11, {k: k * (LIMITS.max_str_len - 8) for k in "abc"}),
               ()),  # within every limit: the command refuses the arguments
        Attack("truncated-body", 12, _request(12, {"a": "y" * 1000})[:-10], ()),
        Attack("garbage", None, b"\xc1" + rng.randbytes(64 * 1024), ()),
    ]  # fmt: skip


def closing_attacks(rng: random.Random) -> list[bytes]:
    """Streams after which the server may (or must) end the connection."""
    return [
        struct.pack(">I", 0xFFFFFFFF) + b"x" * 1024,  # oversized header
        struct.pack(">I", MAX) + b"\x91" * MiB,  # a frame cut off by the peer
        rng.randbytes(256 * 1024),  # a random stream
    ]


def _rss(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


@pytest.fixture
async def launcher(tmp_path: Path) -> AsyncIterator[tuple[int, Path]]:
    """The command server in a child process: (pid, socket), ready for calls."""
    socket = tmp_path / "sockets" / "launcher-sock"
    socket.parent.mkdir()  # as the launcher's main does; the server makes it 0700
    log = (tmp_path / "server.log").open("wb")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(  # noqa: ASYNC220 - a plain child process, waited for below
        [sys.executable, "-m", "tests.unit.shared.wire.launcher_server", str(socket), str(tmp_path)],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        async with asyncio.timeout(30):
            while not socket.exists():
                assert proc.poll() is None, (tmp_path / "server.log").read_text()
                await asyncio.sleep(0.05)
        yield proc.pid, socket
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


async def _ping(socket: Path) -> Any:
    async with RpcClient.connect(socket) as client:
        return await client.call("ping", {}, tier=Tier.SHORT)


async def _read_replies(reader: asyncio.StreamReader, count: int) -> list[dict[str, Any]]:
    replies: list[dict[str, Any]] = []
    while len(replies) < count:
        reply = await read_frame(reader)
        assert reply is not None, f"connection closed after {len(replies)} of {count} replies"
        replies.append(reply)
    return replies


def _limit(reply: dict[str, Any]) -> Any:
    return reply.get("error", {}).get("details", {}).get("limit")


async def _in_sync_round(socket: Path, attacks: list[Attack], first_id: int) -> None:
    """Each attack then a ping on one connection: one reply each, refusals typed and naming
    the limit, pings answered."""
    reader, writer = await asyncio.open_unix_connection(str(socket))
    try:
        async with asyncio.TaskGroup() as tg:
            replies = tg.create_task(_read_replies(reader, 2 * len(attacks)))
            for i, attack in enumerate(attacks):
                writer.write(_frame(attack.body) + _frame(_request(first_id + i)))
                await writer.drain()
        by_id = {r["id"]: r for r in replies.result()}
        assert len(by_id) == len(replies.result()), "one reply per frame"
        for i, attack in enumerate(attacks):
            ping = by_id[first_id + i]  # answered, or refused for want of buffer budget
            assert ping.get("result") == "pong" or _limit(ping) in BUDGETS, ping
            refusal = by_id[attack.rid]
            assert "error" in refusal, (attack.name, refusal)
            if attack.limits:
                assert _limit(refusal) in (*attack.limits, *BUDGETS), (attack.name, refusal)
    finally:
        writer.close()


async def _closing_round(socket: Path, stream: bytes) -> None:
    """A stream the server may end the connection on: it reads it and answers or hangs up."""
    reader, writer = await asyncio.open_unix_connection(str(socket))
    try:
        writer.write(stream)
        await writer.drain()
        writer.write_eof()
        await reader.read()
    except ConnectionError:
        pass  # the server hung up while we still wrote: as good as any answer
    finally:
        writer.close()


async def _worker(socket: Path, seed: int) -> None:
    rng = random.Random(seed)
    attacks = in_sync_attacks(rng)
    for round_ in range(ROUNDS):
        rng.shuffle(attacks)
        await _in_sync_round(socket, attacks, first_id=1000 * (round_ + 1))
        for stream in closing_attacks(rng):
            await _closing_round(socket, stream)


async def test_rss_stays_within_64_mib_of_idle_under_hostile_frames(
    launcher: tuple[int, Path],
) -> None:
    """Eight connections of hostile frames raise the launcher's peak RSS less than 64 MiB
    above idle; every frame that keeps the stream in sync gets one reply (a refusal naming
    the limit, or the command's own error), the pings between them are answered, and a
    new client is served afterwards."""
    pid, socket = launcher
    for _ in range(20):  # warm: the code paths of a served call are loaded
        assert await _ping(socket) == "pong"
    idle = _rss(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := current RSS
    async with asyncio.timeout(240):
        async with asyncio.TaskGroup() as tg:
            for seed in range(WORKERS):
                tg.create_task(_worker(socket, seed))
    peak = _rss(pid, "VmHWM")
    assert await _ping(socket) == "pong"
    assert peak - idle <= RSS_HEADROOM, f"idle {idle / MiB:.1f} MiB, peak {peak / MiB:.1f} MiB"
