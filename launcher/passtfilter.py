"""Between QEMU and passt on a dual-stack pod: the guest's IPv6 frames sent from `::` are
dropped, everything else passes unchanged.

passt 2023_03 (Debian 12's) takes the source of each IPv6 frame the guest sends as the
guest's address, the one inbound connections to the pod's IPv6 address are delivered to.
Duplicate address detection (RFC 4862) probes a new address with neighbour solicitations
sent from the unspecified address `::`: a guest that configures an address (the test
guest's DHCPv6 one, a SLAAC one) and then stays quiet leaves passt sending every inbound
IPv6 SYN to `::`, which the guest drops (seen on real nodes in passt's own capture; IPv4 is
not affected). passt has no use for those frames (it answers no DAD probe and tracks no
MLD), so on a pod with a global IPv6 address the launcher relays QEMU's stream to passt's
socket and leaves them out; frames from passt pass as they are. The streams are QEMU's
`-netdev stream` framing: a 4-byte big-endian length before each Ethernet frame.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import cast

import structlog

log = structlog.get_logger("launcher.passtfilter")

CONNECT_TIMEOUT = 10.0
_IPV6 = b"\x86\xdd"
_UNSPECIFIED = bytes(16)
_HIGH_WATER = 1 << 20
IF_INET6 = Path("/proc/net/if_inet6")


def pod_has_ipv6(if_inet6: Path = IF_INET6) -> bool:
    """This network namespace (the launcher pod's) holds a global IPv6 address: scope 00
    in /proc/net/if_inet6 ("address ifindex prefixlen scope flags name")."""
    try:
        lines = if_inet6.read_text().splitlines()
    except OSError:
        return False
    return any(len(f := line.split()) >= 6 and f[3] == "00" for line in lines)


def from_unspecified(frame: memoryview) -> bool:
    """An Ethernet frame carrying IPv6 from `::` (a DAD probe, an early MLD report)."""
    return len(frame) >= 38 and frame[12:14] == _IPV6 and frame[22:38] == _UNSPECIFIED


class FrameFilter:
    """Length-prefixed frames in, the same stream out without the IPv6 ones from `::`."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.dropped = 0

    def feed(self, data: bytes) -> bytes:
        """The whole frames completed by `data` that pass (a partial one waits)."""
        buf = self._buf
        fresh = not buf  # no partial frame waiting: `data` itself may go out as it is
        buf += data
        out = bytearray()
        at = kept = 0  # buf[kept:at]: frames passing, not yet copied out
        view = memoryview(buf)
        try:
            while len(buf) - at >= 4:
                end = at + 4 + int.from_bytes(view[at : at + 4], "big")
                if end > len(buf):
                    break
                if from_unspecified(view[at + 4 : end]):
                    out += view[kept:at]
                    kept = end
                    self.dropped += 1
                at = end
            whole = fresh and kept == 0 and at == len(buf)
            if not whole:
                out += view[kept:at]
        finally:
            view.release()
        del buf[:at]
        return data if whole else bytes(out)  # the common case (whole frames, none dropped)


class _Side(asyncio.Protocol):
    """One end of a relay (QEMU's or passt's connection)."""

    def __init__(self, relay: _Relay) -> None:
        self.relay = relay
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports (the launcher's loop) are not asyncio.Transport subclasses
        self.transport = cast(asyncio.Transport, transport)
        self.transport.set_write_buffer_limits(high=_HIGH_WATER)
        self.relay.made(self)

    def data_received(self, data: bytes) -> None:
        self.relay.received(self, data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.relay.close()

    def pause_writing(self) -> None:  # the other side waits for this one to drain
        self.relay.other(self).pause()

    def resume_writing(self) -> None:
        self.relay.other(self).resume()

    def pause(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()


class _Relay:
    """QEMU's connection and the one the launcher opens to passt for it."""

    def __init__(self, alias: str, passt_socket: Path) -> None:
        self.alias = alias
        self.passt_socket = passt_socket
        self.qemu = _Side(self)
        self.passt = _Side(self)
        self.filter = FrameFilter()
        self._early = bytearray()  # QEMU's frames before passt's connection is up
        self._task: asyncio.Task[None] | None = None

    def other(self, side: _Side) -> _Side:
        return self.passt if side is self.qemu else self.qemu

    def made(self, side: _Side) -> None:
        if side is self.qemu:
            self._task = asyncio.get_running_loop().create_task(self._connect())
        elif self._early and self.passt.transport is not None:
            self.passt.transport.write(bytes(self._early))
            self._early.clear()

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                await loop.create_unix_connection(lambda: self.passt, str(self.passt_socket))
        except OSError as e:  # TimeoutError too
            log.error("passt_filter_connect_failed", interface=self.alias, error=str(e))
            self.close()

    def received(self, side: _Side, data: bytes) -> None:
        if side is self.qemu:
            data = self.filter.feed(data)
            if self.passt.transport is None:
                self._early += data
                return
        peer = self.other(side).transport
        if data and peer is not None and not peer.is_closing():
            peer.write(data)

    def close(self) -> None:
        for side in (self.qemu, self.passt):
            if side.transport is not None and not side.transport.is_closing():
                side.transport.close()
        if self._task is not None and not self._task.done():
            self._task.cancel()


class PasstFilter:
    """The relays of one interface: a UNIX socket QEMU connects to (the path QEMU is given),
    each connection relayed to passt's own socket."""

    def __init__(self, alias: str, *, listen: Path, passt_socket: Path) -> None:
        self.alias = alias
        self.listen = listen
        self.passt_socket = passt_socket
        self._server: asyncio.Server | None = None
        self._relays: list[_Relay] = []

    async def start(self) -> None:
        """Listening on `listen` (QEMU may connect from now on)."""
        self.listen.unlink(missing_ok=True)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_unix_server(self._accepted, str(self.listen))
        log.info("passt_filter_listening", interface=self.alias, socket=str(self.listen))

    def _accepted(self) -> _Side:
        relay = _Relay(self.alias, self.passt_socket)
        self._relays.append(relay)
        return relay.qemu

    def dropped(self) -> int:
        """Frames left out so far (IPv6 from `::`)."""
        return sum(r.filter.dropped for r in self._relays)

    async def stop(self) -> None:
        """No more connections; each relay closed."""
        log.info("passt_filter_stopped", interface=self.alias, dropped=self.dropped())
        for relay in self._relays:
            relay.close()
        self._relays.clear()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self._server.wait_closed()
            self._server = None
        self.listen.unlink(missing_ok=True)
