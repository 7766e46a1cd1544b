"""The migration proxy: carries a live migration between two nodes that share nothing.

libvirt's peer-to-peer migration opens three streams from the source pod, each a Unix
socket: the destination libvirtd's connection, the memory stream and the disk (NBD)
stream; the destination QEMU binds the last two. Per migration (KubeVirt's design):

    source pod              source handler            target handler   target pod
    <mig>/sock/libvirt-sock ▶ Unix listener ═ mTLS ═▶ TCP :p0 ▶ <private>/libvirt/sock/libvirt-sock
    <mig>/run/mig-mem.sock  ▶ Unix listener ═ mTLS ═▶ TCP :p1 ▶ <mig>/run/mig-mem.sock
    <mig>/run/mig-nbd.sock  ▶ Unix listener ═ mTLS ═▶ TCP :p2 ▶ <mig>/run/mig-nbd.sock
    (the source handler reads the target's domain XML once)  TCP :p3 (serves it, closes)

`<mig>` is `/var/run/kubevirt-private/mig/<migration uid[:8]>` in BOTH pods (each pod's own
`private` emptyDir): the memory and NBD paths that libvirt hands to both QEMUs name the target
handler's socket in the target pod and the source handler's listener in the source pod.
The handlers reach the pods' emptyDirs under the kubelet's pods dir. Ports are published in
the VMI's migrationState as `targetDirectMigrationNodePorts` (KubeVirt's shape: port →
socket code: 0 libvirt, 49152 memory, 49153 disks; 49154, the domain XML, is ours) next to
`targetNodeAddress` (the target handler's node-reachable IP).

Both ends authenticate: TLS 1.2+ with the handler certificate on both sides, verified
against the kubevirt-py CA, and the peer's CN must be the handler's. A refused connection is
logged (`migration_proxy_refused`) and closed; it touches no other connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import ssl
from collections.abc import Mapping
from enum import IntEnum
from pathlib import Path, PurePosixPath

import structlog

from handler.migration_tls import ProxyConfig
from shared import podlayout
from shared.launcherpod import LAUNCHER_GID
from shared.mtls import peer_cn
from shared.tasks import cancelling
from shared.wire.unixpath import bind_private, short_path

log = structlog.get_logger("handler.migration_proxy")

CHUNK = 256 * 1024
MAX_DOMAIN_XML = 4 * 1024 * 1024
# Inside every launcher pod: where a migration's sockets live (the pods' own `private` dirs).
MIG_ROOT = PurePosixPath(podlayout.PRIVATE_DIR, "mig")
LIBVIRT_SOCKET = PurePosixPath(podlayout.LIBVIRT_ROOT, podlayout.LIBVIRT_SOCKET)


class Stream(IntEnum):
    """What a proxy port carries; the codes are KubeVirt's (DOMAIN_XML is ours)."""

    LIBVIRT = 0
    MEMORY = 49152
    DISKS = 49153
    DOMAIN_XML = 49154


# Under a migration's dir: the Unix socket of each stream (the launcher's Endpoint layout).
SOCKET_NAMES: Mapping[Stream, PurePosixPath] = {
    Stream.LIBVIRT: podlayout.LIBVIRT_SOCKET,
    Stream.MEMORY: podlayout.MIGRATION_MEMORY_SOCKET,
    Stream.DISKS: podlayout.MIGRATION_DISKS_SOCKET,
}


def migration_dir(migration_uid: str) -> PurePosixPath:
    """The migration's directory as both launchers see it (the `address` for `migrate`)."""
    return MIG_ROOT / migration_uid[:8]


def private_volume(pods_dir: Path, pod_uid: str) -> Path:
    """A launcher pod's `private` emptyDir, as the node (and its handler) sees it."""
    return pods_dir / pod_uid / podlayout.EMPTY_DIRS / podlayout.PRIVATE_VOLUME


def on_node(pods_dir: Path, pod_uid: str, in_pod: PurePosixPath) -> Path:
    """The node path of `in_pod`, a path under the pod's PRIVATE_DIR."""
    rel = in_pod.relative_to(podlayout.PRIVATE_DIR)
    return private_volume(pods_dir, pod_uid) / rel


def encode_ports(ports: Mapping[Stream, int]) -> dict[str, int]:
    """migrationState.targetDirectMigrationNodePorts: port (a string) → stream code."""
    return {str(port): int(stream) for stream, port in ports.items()}


def decode_ports(published: Mapping[str, int]) -> dict[Stream, int]:
    """The inverse of `encode_ports`; unknown codes are ignored."""
    out: dict[Stream, int] = {}
    for port, code in published.items():
        with contextlib.suppress(ValueError):
            out[Stream(int(code))] = int(port)
    return out


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until EOF, then half-close (libvirt and QEMU end streams that way too)."""
    while data := await reader.read(CHUNK):
        if writer.is_closing():  # uvloop raises RuntimeError on a closed transport's write
            raise ConnectionResetError("the other end of the splice closed")
        writer.write(data)
        await writer.drain()
    if writer.can_write_eof():
        with contextlib.suppress(OSError):
            writer.write_eof()


async def splice(
    a: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    b: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> None:
    """Both directions until both ended or either failed; closes both ends."""
    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(_pump(a[0], b[1]))
            tg.create_task(_pump(b[0], a[1]))
    except* (OSError, ssl.SSLError) as group:
        log.info("migration_proxy_stream_broken", error=str(group.exceptions[0]))
    finally:
        for _, w in (a, b):
            w.close()


class _Connections:
    """The live connections of one proxy end, cancelled together at teardown."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def track(self) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def cancel_nowait(self) -> None:
        for t in self._tasks:
            if t is not asyncio.current_task():
                t.cancel()

    async def cancel_all(self, timeout: float = 5.0) -> None:
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        if tasks:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*tasks, return_exceptions=True)


async def _handshake(
    config: ProxyConfig, conn: socket.socket
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    """Server-side TLS on an accepted socket; None (logged, closed) unless the client
    presented a handler certificate of our CA. The TLS layer is in place before anything
    is read (asyncio's StreamWriter.start_tls would lose a ClientHello already buffered)."""
    loop = asyncio.get_running_loop()
    peer = conn.getpeername()
    reader = asyncio.StreamReader(limit=CHUNK)
    protocol = asyncio.StreamReaderProtocol(reader)
    try:
        transport, _ = await loop.connect_accepted_socket(
            lambda: protocol,
            conn,
            ssl=config.server_context(),
            ssl_handshake_timeout=config.handshake_timeout,
        )
    except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as exc:
        if cancelling():
            raise
        log.warning("migration_proxy_refused", peer=str(peer), why=f"tls: {exc}")
        conn.close()
        return None
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    cn = peer_cn(writer)
    if cn != config.peer_cn:
        log.warning("migration_proxy_refused", peer=str(peer), why=f"client CN {cn!r}")
        writer.close()
        return None
    return reader, writer


class TargetProxy:
    """The target handler's end: one TLS port per stream, forwarding to the target pod."""

    def __init__(
        self,
        config: ProxyConfig,
        *,
        migration_uid: str,
        sockets: Mapping[Stream, Path],
        domain_xml: str,
    ) -> None:
        self.migration_uid = migration_uid
        self._config = config
        self._sockets = sockets
        self._xml = domain_xml.encode()
        self._listeners: list[socket.socket] = []
        self._conns = _Connections()
        self.ports: dict[Stream, int] = {}

    async def open(self) -> dict[Stream, int]:
        """Listen on one free port per stream; each runs an accept loop until `close`."""
        loop = asyncio.get_running_loop()
        for stream in Stream:
            listener = socket.create_server((self._config.host, 0), backlog=16)
            listener.setblocking(False)
            self._listeners.append(listener)
            self.ports[stream] = int(listener.getsockname()[1])
            self._conns.add(loop.create_task(self._serve(stream, listener)))
        log.info("migration_proxy_target_open", migration=self.migration_uid, ports=self.ports)
        return self.ports

    async def _serve(self, stream: Stream, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(listener)
            self._conns.add(loop.create_task(self._accept(stream, conn)))

    async def _accept(self, stream: Stream, conn: socket.socket) -> None:
        opened = await _handshake(self._config, conn)
        if opened is None:
            return
        reader, writer = opened
        if stream is Stream.DOMAIN_XML:
            writer.write(self._xml)
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(self._config.connect_timeout):
                    await writer.drain()
            writer.close()
            return
        try:
            async with asyncio.timeout(self._config.connect_timeout):
                with short_path(self._sockets[stream]) as path:
                    inner = await asyncio.open_unix_connection(path)
        except (OSError, TimeoutError) as exc:
            if cancelling():
                raise
            log.warning("migration_proxy_target_unreachable", stream=stream.name, error=str(exc))
            writer.close()
            return
        await splice((reader, writer), inner)

    async def close(self) -> None:
        await self._conns.cancel_all()  # the accept loops first, then their sockets
        for listener in self._listeners:
            listener.close()
        self._listeners.clear()
        log.info("migration_proxy_target_closed", migration=self.migration_uid)


class SourceProxy:
    """The source handler's end: Unix listeners in the source pod's migration dir."""

    def __init__(
        self,
        config: ProxyConfig,
        *,
        migration_uid: str,
        host: str,
        ports: Mapping[Stream, int],
        directory: Path,
    ) -> None:
        self.migration_uid = migration_uid
        self._config = config
        self._host = host
        self._ports = ports
        self.directory = directory
        self._servers: list[asyncio.Server] = []
        self._conns = _Connections()

    async def open(self) -> None:
        missing = set(SOCKET_NAMES) - set(self._ports)
        if missing:
            raise ValueError(f"the target published no port for {sorted(s.name for s in missing)}")
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self.directory)  # a previous attempt's sockets
        for stream, name in SOCKET_NAMES.items():

            async def accept(
                r: asyncio.StreamReader, w: asyncio.StreamWriter, s: Stream = stream
            ) -> None:
                await self._accept(s, r, w)

            # 0660 in a 0710 directory, whatever the umask: only the launcher's libvirtd
            # and QEMU (its group; root in a root launcher) connect.
            sock = bind_private(self.directory / name, group=LAUNCHER_GID)
            self._servers.append(await asyncio.start_unix_server(accept, sock=sock))
        log.info("migration_proxy_source_open", migration=self.migration_uid, target=self._host)

    async def _connect(self, stream: Stream) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        cfg = self._config
        async with asyncio.timeout(cfg.connect_timeout + cfg.handshake_timeout):
            reader, writer = await asyncio.open_connection(
                self._host,
                self._ports[stream],
                ssl=cfg.client_context(),
                local_addr=cfg.local_address(self._host),
            )
        if (cn := peer_cn(writer)) != cfg.peer_cn:
            writer.close()
            raise ssl.SSLError(f"the target presented CN {cn!r}")
        return reader, writer

    async def _accept(
        self, stream: Stream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._conns.track()
        try:
            outer = await self._connect(stream)
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            if cancelling():
                raise
            log.warning("migration_proxy_source_unreachable", stream=stream.name, error=str(exc))
            writer.close()
            return
        await splice((reader, writer), outer)

    async def domain_xml(self) -> str:
        """The target launcher's domain definition, as its handler serves it."""
        reader, writer = await self._connect(Stream.DOMAIN_XML)
        try:
            async with asyncio.timeout(self._config.connect_timeout):
                data = await reader.read(MAX_DOMAIN_XML + 1)
                while chunk := await reader.read(MAX_DOMAIN_XML + 1 - len(data)):
                    data += chunk
        finally:
            writer.close()
        if not data or len(data) > MAX_DOMAIN_XML:
            raise ValueError(f"the target served {len(data)} bytes of domain XML")
        return data.decode()

    def close(self) -> None:
        """Stop listening, cut the connections, remove the sockets (the connections'
        tasks end on their own, at their next step)."""
        for server in self._servers:
            server.close()
        self._conns.cancel_nowait()
        self._servers.clear()
        shutil.rmtree(self.directory, ignore_errors=True)
        log.info("migration_proxy_source_closed", migration=self.migration_uid)
