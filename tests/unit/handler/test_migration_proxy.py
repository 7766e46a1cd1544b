"""The migration proxy's two ends on loopback: streams cross them under mutual TLS with the
handler certificate, anything else is refused and logged, teardown leaves nothing behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import ssl
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from handler.migration_proxy import (
    SOCKET_NAMES,
    SourceProxy,
    Stream,
    TargetProxy,
    decode_ports,
    encode_ports,
)
from handler.migration_tls import HANDLER_CN, ProxyConfig
from shared.launcherpod import LAUNCHER_GID
from shared.wire.unixpath import short_path
from tests.unit.handler import certs

XML = "<domain><name>demo</name></domain>"


def cert_dir(root: Path, ca: certs.Pair, cn: str, usage: str) -> Path:
    pair = certs.leaf(root, cn, ca, server=True, usage=usage)
    out = root / f"secret-{cn}"
    out.mkdir()
    shutil.copy(pair.cert, out / "tls.crt")
    shutil.copy(pair.key, out / "tls.key")
    shutil.copy(ca.cert, out / "ca.crt")
    return out


@dataclass
class Rig:
    config: ProxyConfig
    target: TargetProxy
    source: SourceProxy
    ca: certs.Pair
    root: Path


async def _upper(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A stand-in for the target pod's sockets: answers every chunk upper-cased."""
    while data := await reader.read(1024):
        writer.write(data.upper())
        await writer.drain()
    writer.close()


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    ca = certs.ca(tmp_path, "kubevirt-py-ca")
    config = ProxyConfig(
        cert_dir=cert_dir(tmp_path, ca, HANDLER_CN, "serverAuth,clientAuth"),
        host="127.0.0.1",
        connect_timeout=5,
        handshake_timeout=5,
    )
    # Kubelet-like depth: past sun_path's 108 bytes, as on real nodes.
    pod = tmp_path / ("p" * 60) / "volumes" / "kubernetes.io~empty-dir" / "private"
    sockets = {s: pod / "mig" / "abcd1234" / SOCKET_NAMES[s] for s in SOCKET_NAMES}
    servers = []
    for path in sockets.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        with short_path(path) as short:
            servers.append(await asyncio.start_unix_server(_upper, path=short))
    target = TargetProxy(config, migration_uid="m1", sockets=sockets, domain_xml=XML)
    ports = decode_ports(encode_ports(await target.open()))
    source_dir = tmp_path / ("s" * 60) / "volumes" / "kubernetes.io~empty-dir" / "private" / "m"
    source = SourceProxy(
        config, migration_uid="m1", host="127.0.0.1", ports=ports, directory=source_dir
    )
    await source.open()
    yield Rig(config=config, target=target, source=source, ca=ca, root=tmp_path)
    source.close()
    await target.close()
    for server in servers:
        server.close()


async def _through_source(rig: Rig, stream: Stream, payload: bytes) -> bytes:
    with short_path(rig.source.directory / SOCKET_NAMES[stream]) as path:
        reader, writer = await asyncio.open_unix_connection(path)
    writer.write(payload)
    await writer.drain()
    async with asyncio.timeout(10):
        answer = await reader.readexactly(len(payload))
    writer.close()
    return answer


async def test_streams_and_the_domain_xml_cross_the_proxy(rig: Rig) -> None:
    """Each stream's bytes reach the target pod's socket and its answers come back; the
    source end reads the target's domain XML from its port."""
    for stream in SOCKET_NAMES:
        assert await _through_source(rig, stream, b"hello " + stream.name.encode()) == (
            b"HELLO " + stream.name.encode()
        )
    assert await rig.source.domain_xml() == XML


async def _raw(port: int, *, ctx: ssl.SSLContext | None, send: bytes = b"") -> bytes:
    """Connect (optionally TLS), send, and read what comes back until the peer closes."""
    with contextlib.suppress(ssl.SSLError, ConnectionError):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
        writer.write(send)
        async with asyncio.timeout(10):
            got = await reader.read()
        writer.close()
        return got
    return b""


async def test_connections_without_a_handler_certificate_are_refused_and_logged(
    rig: Rig,
) -> None:
    """Garbage, TLS without a client certificate and a certificate of our CA with another
    CN (the controller's) are refused and logged; the migration's streams keep working."""
    port = rig.target.ports[Stream.DOMAIN_XML]
    anonymous = ssl.create_default_context(cafile=rig.ca.cert)
    anonymous.check_hostname = False
    other = ssl.create_default_context(cafile=rig.ca.cert)
    other.check_hostname = False
    pair = certs.leaf(rig.root, "kubevirt-py-controller", rig.ca, server=False)
    other.load_cert_chain(pair.cert, pair.key)
    with capture_logs() as logs:
        assert await _raw(port, ctx=None, send=b"GET / HTTP/1.0\r\n\r\n" * 100) == b""
        assert XML.encode() not in await _raw(port, ctx=anonymous)
        assert XML.encode() not in await _raw(port, ctx=other)
    refused = [e for e in logs if e["event"] == "migration_proxy_refused"]
    assert len(refused) == 3, logs
    assert "kubevirt-py-controller" in refused[2]["why"]
    assert await _through_source(rig, Stream.MEMORY, b"still") == b"STILL"


async def test_teardown_closes_the_ports_and_removes_the_source_sockets(rig: Rig) -> None:
    """After close, the target's ports refuse connections and the source's dir is gone."""
    rig.source.close()
    await rig.target.close()
    assert not rig.source.directory.exists()
    for port in rig.target.ports.values():
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)


async def test_source_sockets_are_private_whatever_the_umask(rig: Rig) -> None:
    """The source end's sockets are 0660 in a 0710 directory of the launchers' group (only
    the launcher's libvirtd and QEMU connect), even when made again under umask 0."""
    old = os.umask(0)
    try:
        rig.source.close()
        await rig.source.open()
    finally:
        os.umask(old)
    for name in SOCKET_NAMES.values():
        path = rig.source.directory / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o660
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o710
        assert path.stat().st_gid == path.parent.stat().st_gid == LAUNCHER_GID
