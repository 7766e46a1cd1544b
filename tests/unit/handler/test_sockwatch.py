"""The inotify watch that wakes the launcher pool when a launcher's socket appears."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from handler.launchers import LauncherPool, LauncherState
from handler.sockwatch import DirWatch
from tests.unit.handler.test_launchers import FAST, StandIn
from tests.unit.handler.waiting import until

NEVER = 3600.0  # a bound no test waits out: only the watch can end these waits


async def test_a_name_moved_into_the_directory_wakes_the_wait(tmp_path: Path) -> None:
    """A file renamed into the watched directory (as the launcher renames its socket)
    ends a wait whose own bound is an hour away."""
    target = tmp_path / "launcher-sock"
    watch = DirWatch(tmp_path)
    try:
        waiting = asyncio.create_task(watch.until(target, timeout=NEVER))
        await until(lambda: watch.watching, "the watch opened")
        (tmp_path / "launcher-init-sock").write_text("")
        (tmp_path / "launcher-init-sock").rename(target)
        assert await asyncio.wait_for(waiting, 30)
    finally:
        watch.close()


async def test_an_existing_path_returns_at_once(tmp_path: Path) -> None:
    """A path that is already there needs no event."""
    (tmp_path / "launcher-sock").write_text("")
    watch = DirWatch(tmp_path)
    try:
        assert await asyncio.wait_for(watch.until(tmp_path / "launcher-sock", timeout=NEVER), 30)
    finally:
        watch.close()


async def test_a_missing_directory_falls_back_to_the_bounded_wait(tmp_path: Path) -> None:
    """No directory to watch yet: the wait lasts its bound and reports the path absent;
    once the directory exists the watch opens."""
    directory = tmp_path / "sockets"
    watch = DirWatch(directory)
    try:
        assert not await watch.until(directory / "launcher-sock", timeout=0.01)
        assert not watch.watching
        directory.mkdir()
        assert not await watch.until(directory / "launcher-sock", timeout=0.01)
        assert watch.watching
    finally:
        watch.close()


async def test_the_pool_connects_on_the_rename_without_polling(tmp_path: Path) -> None:
    """With a socket poll of an hour, a starting launcher is still connected once it
    renames its socket into place: the pool's wait is woken by the watch."""
    config = dataclasses.replace(FAST, socket_poll=NEVER)
    pool = LauncherPool(config, on_change=lambda _: None)
    stand_in = StandIn(tmp_path / "sockets")
    stand_in.sockets.mkdir(parents=True)
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(pool.run())
        await pool.started.wait()
        conn = pool.ensure(uid="u1", key="ns/vm", socket=stand_in.sockets / "launcher-sock")
        await asyncio.sleep(0.05)
        assert conn.state is LauncherState.WAITING
        async with stand_in.serving():
            await until(lambda: conn.state is LauncherState.CONNECTED, "connected", timeout=30)
        task.cancel()


async def test_a_connected_launcher_holds_no_inotify_instance(tmp_path: Path) -> None:
    """Once the socket is there the connection gives its inotify instance back (a node
    has 128 per user, shared with the kubelet), and takes one again only to wait."""
    pool = LauncherPool(FAST, on_change=lambda _: None)
    stand_in = StandIn(tmp_path / "sockets")
    stand_in.sockets.mkdir(parents=True)

    def inotify_fds() -> int:
        fds = Path("/proc/self/fd")
        return sum(1 for fd in fds.iterdir() if _is_inotify(fd))

    before = inotify_fds()
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(pool.run())
        await pool.started.wait()
        conn = pool.ensure(uid="u1", key="ns/vm", socket=stand_in.sockets / "launcher-sock")
        await until(lambda: inotify_fds() == before + 1, "the wait's watch opened")
        async with stand_in.serving():
            await until(lambda: conn.state is LauncherState.CONNECTED, "connected", timeout=30)
            assert inotify_fds() == before
        task.cancel()


def _is_inotify(fd: Path) -> bool:
    try:
        return "inotify" in str(fd.readlink())
    except OSError:
        return False
