"""The launcher's relay between QEMU and passt on a dual-stack pod (launcher/passtfilter.py):
the guest's IPv6 frames from `::` are left out, every other frame passes both ways."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
import uvloop

from launcher.passt import Passt, PasstInterface, inner_socket
from launcher.passtfilter import FrameFilter, PasstFilter, pod_has_ipv6
from tests.unit.launcher.test_passt import FAKE

GUEST, PASST = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")


def _v6(src: str, payload: bytes = b"x" * 20) -> bytes:
    """An Ethernet frame with an IPv6 header from `src` (hex, 32 digits)."""
    header = bytes.fromhex("6000000000143aff") + bytes.fromhex(src) + bytes(16)
    return PASST + GUEST + b"\x86\xdd" + header + payload


V4 = PASST + GUEST + b"\x08\x00" + bytes(40)
DAD = _v6("0" * 32)  # a duplicate address detection probe: from ::
LINK_LOCAL = _v6("fe80" + "0" * 24 + "0001")
SHORT = PASST + GUEST + b"\x86\xdd" + bytes(10)  # too short to carry a source: passes


def _framed(*frames: bytes) -> bytes:
    return b"".join(len(f).to_bytes(4, "big") + f for f in frames)


def test_frames_from_the_unspecified_address_are_left_out_whatever_the_chunks() -> None:
    """IPv6 frames from `::` are dropped and counted; IPv4, IPv6 from any other address and
    frames too short to tell pass, in order, byte for byte, however the stream is cut."""
    stream = _framed(V4, DAD, LINK_LOCAL, DAD, SHORT, V4)
    want = _framed(V4, LINK_LOCAL, SHORT, V4)
    for size in (1, 3, 7, 64, len(stream)):
        f = FrameFilter()
        out = b"".join(f.feed(stream[i : i + size]) for i in range(0, len(stream), size))
        assert (out, f.dropped) == (want, 2), size


def test_whole_frames_with_nothing_to_drop_pass_without_a_copy() -> None:
    """The common chunk (whole frames, none from `::`, nothing waiting) goes out as the same
    bytes object; after a partial frame or a drop the output is built."""
    f = FrameFilter()
    chunk = _framed(V4, LINK_LOCAL)
    assert f.feed(chunk) is chunk
    assert f.feed(_framed(V4, DAD)) == _framed(V4)
    assert f.feed(chunk[:5]) == b"" and f.feed(chunk[5:]) == chunk


def test_a_pod_with_a_global_ipv6_address_is_dual_stack(tmp_path: Path) -> None:
    """Scope 00 in /proc/net/if_inet6 (a global address) makes the pod dual-stack;
    loopback and link-local (scopes 10, 20) or no file do not."""
    f = tmp_path / "if_inet6"
    local = (
        "00000000000000000000000000000001 01 80 10 80       lo\n"
        "fe800000000000008850c0fffe67d314 02 40 20 80     eth0\n"
    )
    f.write_text(local)
    assert not pod_has_ipv6(f)
    f.write_text(local + "fd0d4a03aeea00010000000000000004 02 40 00 80     eth0\n")
    assert pod_has_ipv6(f)
    assert not pod_has_ipv6(tmp_path / "missing")


async def test_the_relay_carries_both_ways_without_the_dad_probes(tmp_path: Path) -> None:
    """QEMU connects to the relay's socket; passt (here a server on its own socket) gets the
    guest's frames without those from `::`, the guest gets passt's as sent; stopping closes
    QEMU's connection and removes the socket."""
    await _relay_story(tmp_path)


def test_the_relay_runs_on_the_launchers_uvloop(tmp_path: Path) -> None:
    """The same on uvloop, the launcher's event loop (its transports are not asyncio's
    classes)."""
    uvloop.run(_relay_story(tmp_path))


async def _relay_story(tmp_path: Path) -> None:
    got = bytearray()
    reached = asyncio.Event()

    async def passt(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(_framed(LINK_LOCAL))
        while data := await reader.read(65536):
            got.extend(data)
            reached.set()
        writer.close()

    inner, outer = tmp_path / "p-passt.sock", tmp_path / "p.sock"
    server = await asyncio.start_unix_server(passt, str(inner))
    relay = PasstFilter("default", listen=outer, passt_socket=inner)
    await relay.start()
    async with asyncio.timeout(10):
        reader, writer = await asyncio.open_unix_connection(str(outer))
        writer.write(_framed(DAD, V4))
        assert await reader.readexactly(len(_framed(LINK_LOCAL))) == _framed(LINK_LOCAL)
        writer.write(_framed(DAD, LINK_LOCAL))
        while bytes(got) != _framed(V4, LINK_LOCAL):
            reached.clear()
            await reached.wait()
        assert relay.dropped() == 2
        await relay.stop()
        assert await reader.read() == b""  # the relay closed QEMU's end
    assert not outer.exists()
    writer.close()
    server.close()


@pytest.fixture
def fake_passt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "passt").write_text(FAKE.format(python=sys.executable))
    (bin_dir / "passt").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


async def test_a_relayed_passt_listens_on_its_own_socket(tmp_path: Path, fake_passt: None) -> None:
    """On a dual-stack pod passt is started on its own socket and the relay listens on the
    interface's, the one QEMU is given; both go with stop."""
    iface = PasstInterface(alias="default", socket=tmp_path / "p.sock", mac="02:00:00:00:00:01")
    passt = Passt(relay=True)
    await passt.start([iface])
    assert iface.socket.exists() and inner_socket(iface).exists()
    assert inner_socket(iface) == tmp_path / "p-passt.sock"
    await passt.stop()
    assert not iface.socket.exists()
