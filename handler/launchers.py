"""Launcher clients: one long-lived connection per VMI, owned by the pool's TaskGroup.

Each connection waits for `launcher-sock` to appear (the launcher renames its socket only
once it answers, so the file is the readiness signal; an inotify watch on the sockets dir
wakes the wait), connects with the version handshake, pings while idle, and reconnects
with capped backoff when the connection drops. A launcher whose pings time out is marked
with an `unresponsive` file beside its socket (as KubeVirt does); one whose socket vanished
after it was up, or that refuses connections, is `Gone` — the launcher process is dead.
Every state change is announced with the VMI key so the reconcile loop reacts at once
instead of polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import structlog

from handler.errors import LauncherUnavailable
from handler.sockwatch import DirWatch
from shared import podlayout
from shared.kube.ratelimit import Backoff, BackoffPolicy
from shared.podlayout import LAUNCHER_SOCKET
from shared.wire.client import RpcClient, Tier, Timeouts
from shared.wire.errors import CallTimeout, Disconnected, RemoteError, VersionMismatch, WireError
from shared.wire.launcher_api import TIERS, Method

log = structlog.get_logger("handler.launchers")

SOCKETS_VOLUME = podlayout.SOCKETS_VOLUME
UNRESPONSIVE_MARKER = "unresponsive"
OnChange = Callable[[str], None]


def launcher_socket(pods_dir: Path, pod_uid: str) -> Path:
    """Where the launcher of pod `pod_uid` serves, as seen from the node."""
    volume = pods_dir / pod_uid / podlayout.EMPTY_DIRS / SOCKETS_VOLUME
    return volume / LAUNCHER_SOCKET


def pod_on_node(active_pods: Mapping[str, str], node: str) -> str | None:
    """The UID of the VMI's launcher pod on `node` (status.activePods), if any."""
    return next((uid for uid, where in active_pods.items() if where == node), None)


class LauncherState(StrEnum):
    WAITING = "Waiting"  # no launcher-sock yet: the launcher is starting
    CONNECTED = "Connected"
    UNRESPONSIVE = "Unresponsive"  # connected, but pings time out
    RECONNECTING = "Reconnecting"  # the connection dropped; trying again
    GONE = "Gone"  # socket removed after it was up, or connections refused: launcher dead


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolConfig:
    ping_interval: float = 5.0
    unresponsive_after: int = 2  # consecutive ping timeouts
    gone_after: int = 3  # consecutive refused connects while the socket exists
    watch_interval: float = 0.25  # how often an idle connection checks it is still up
    # The longest wait for a starting launcher's socket between two looks; an inotify
    # watch on its directory wakes the wait as soon as the socket is renamed into place.
    socket_poll: float = 0.25
    backoff: BackoffPolicy = field(default_factory=lambda: BackoffPolicy(initial=0.1, cap=5.0))
    timeouts: Timeouts = field(default_factory=Timeouts)


class LauncherPort(Protocol):
    """One launcher, as the reconcile loop sees it."""

    @property
    def state(self) -> LauncherState: ...

    @property
    def since(self) -> float:
        """Monotonic time the current state began."""
        ...

    async def call(self, method: Method, args: Mapping[str, Any] | None = None) -> Any: ...


class PoolPort(Protocol):
    def ensure(self, *, uid: str, key: str, socket: Path) -> LauncherPort: ...

    def get(self, uid: str) -> LauncherPort | None: ...

    def release(self, uid: str) -> None: ...


class _Connection:
    """The connection to one launcher; `run()` keeps it up until cancelled."""

    def __init__(
        self,
        *,
        key: str,
        socket: Path,
        config: PoolConfig,
        on_change: OnChange,
        clock: Callable[[], float],
    ) -> None:
        self.key = key
        self.socket = socket
        self._config = config
        self._on_change = on_change
        self._clock = clock
        self._state = LauncherState.WAITING
        self._why = "no launcher-sock yet"  # why the state is what it is (for conditions)
        self._since = clock()
        self._client: RpcClient | None = None
        self._broken = asyncio.Event()
        self._ever_connected = False
        self._log = log.bind(vmi=key)

    @property
    def state(self) -> LauncherState:
        return self._state

    @property
    def since(self) -> float:
        return self._since

    async def call(self, method: Method, args: Mapping[str, Any] | None = None) -> Any:
        client = self._client
        if client is None or not client.connected:
            raise LauncherUnavailable(f"launcher of {self.key} is {self._state}: {self._why}")
        try:
            return await client.call(str(method), args or {}, tier=TIERS[method])
        except Disconnected:
            self._broken.set()
            raise

    async def run(self) -> None:
        """Keep the connection up until cancelled. A defect in one connection never ends
        the pool's TaskGroup (and with it the handler): it is logged, the VMI's next sync
        names it in its Synchronized condition (LauncherUnavailable carries the state's
        why), and the connection starts over after the backoff's cap."""
        while True:
            watch = DirWatch(self.socket.parent)
            try:
                await self._run(watch)
            except Exception as exc:
                self._log.exception("launcher_connection_failed", error=repr(exc))
                self._set(self._retry_state(), why=f"{type(exc).__name__}: {exc}")
            finally:
                watch.close()
            await asyncio.sleep(self._config.backoff.cap)

    async def _run(self, watch: DirWatch) -> None:
        backoff = Backoff(self._config.backoff)
        refused = 0
        while True:
            if not self.socket.exists():
                if self._ever_connected:
                    self._set(LauncherState.GONE, why="socket removed")
                await watch.until(self.socket, timeout=self._config.socket_poll)
                continue
            watch.close()  # an inotify instance only while waiting (the node has 128)
            try:
                async with RpcClient.connect(self.socket, timeouts=self._config.timeouts) as client:
                    refused = 0
                    backoff.reset()
                    await self._hold(client)
            except VersionMismatch as exc:
                self._log.error("launcher_version_mismatch", error=str(exc))
                self._set(LauncherState.RECONNECTING, why=str(exc))
            except WireError as exc:
                refused += 1
                gone = refused >= self._config.gone_after
                state = LauncherState.GONE if gone else self._retry_state()
                self._set(state, why=str(exc))
            finally:
                self._client = None
            await asyncio.sleep(backoff.next_delay())

    def _retry_state(self) -> LauncherState:
        if self._state is LauncherState.GONE:
            return LauncherState.GONE
        return LauncherState.RECONNECTING if self._ever_connected else LauncherState.WAITING

    async def _hold(self, client: RpcClient) -> None:
        """Serve calls on `client` and ping it while idle; return when it drops."""
        self._client = client
        self._ever_connected = True
        self._broken.clear()
        self._set(LauncherState.CONNECTED, why="connected")
        self._mark(unresponsive=False)
        misses, last_ping = 0, self._clock()
        while client.connected and not self._broken.is_set():
            await asyncio.sleep(self._config.watch_interval)
            if self._clock() - last_ping < self._config.ping_interval:
                continue
            last_ping = self._clock()
            try:
                await client.call(str(Method.PING), {}, tier=Tier.SHORT)
            except CallTimeout:
                misses += 1
                if misses >= self._config.unresponsive_after:
                    self._set(LauncherState.UNRESPONSIVE, why=f"{misses} pings timed out")
                    self._mark(unresponsive=True)
                continue
            except Disconnected:
                break
            except RemoteError:
                pass  # it answered: alive
            misses = 0
            if self._state is LauncherState.UNRESPONSIVE:
                self._set(LauncherState.CONNECTED, why="answering again")
                self._mark(unresponsive=False)
        self._set(LauncherState.RECONNECTING, why="connection dropped")

    def _set(self, state: LauncherState, *, why: str) -> None:
        if state is self._state:
            return
        self._log.info("launcher_state", state=str(state), was=str(self._state), why=why)
        self._state = state
        self._why = why
        self._since = self._clock()
        self._on_change(self.key)

    def _mark(self, *, unresponsive: bool) -> None:
        marker = self.socket.parent / UNRESPONSIVE_MARKER
        with contextlib.suppress(OSError):
            if unresponsive:
                marker.touch()
            else:
                marker.unlink(missing_ok=True)


class LauncherPool:
    """Connections by VMI uid, each a task in the pool's TaskGroup (run `run()` first)."""

    def __init__(
        self,
        config: PoolConfig,
        *,
        on_change: OnChange,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._on_change = on_change
        self._clock = clock
        self._conns: dict[str, tuple[_Connection, asyncio.Task[None]]] = {}
        self._tg: asyncio.TaskGroup | None = None
        self.started = asyncio.Event()

    async def run(self) -> None:
        """Own the connection tasks until cancelled."""
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            self.started.set()
            try:
                await asyncio.Future()
            finally:
                self._tg = None
                self._conns.clear()

    def ensure(self, *, uid: str, key: str, socket: Path) -> LauncherPort:
        """The connection for `uid` at `socket`, started on first use."""
        found = self._conns.get(uid)
        if found is not None and found[0].socket == socket:
            return found[0]
        if found is not None:
            self.release(uid)
        if self._tg is None:
            raise RuntimeError("the launcher pool is not running")
        conn = _Connection(
            key=key,
            socket=socket,
            config=self._config,
            on_change=self._on_change,
            clock=self._clock,
        )
        task = self._tg.create_task(conn.run(), name=f"launcher-{key}")
        self._conns[uid] = (conn, task)
        return conn

    def get(self, uid: str) -> LauncherPort | None:
        found = self._conns.get(uid)
        return found[0] if found is not None else None

    def release(self, uid: str) -> None:
        """Stop the connection of a VMI that is gone."""
        found = self._conns.pop(uid, None)
        if found is not None:
            found[1].cancel()

    def __len__(self) -> int:
        return len(self._conns)
