"""Processes of the local cluster: starting detached daemons, finding and ending them.

Every process the cluster starts (control plane, node agents, pod containers) carries
the environment variable ``KVPY_LOCALKUBE=<cluster id>``; ``reap_marked`` finds them by
it, so a teardown ends all of them even after a node agent was killed and its pods were
orphaned. A process is never signalled unless its environment carries our marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from localkube.errors import CommandFailed

log = structlog.get_logger()


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonSpec:
    """How to start one long-running process."""

    name: str
    argv: tuple[str, ...]
    log_file: Path
    pidfile: Path
    env: Mapping[str, str] = field(default_factory=dict)


async def run_cmd(argv: list[str], *, timeout: float = 60.0) -> str:
    """Run a short command; return its output or raise CommandFailed."""
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        async with asyncio.timeout(timeout):
            out, _ = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise CommandFailed(argv, None, f"timed out after {timeout}s") from None
    text = out.decode(errors="replace")
    if proc.returncode != 0:
        raise CommandFailed(argv, proc.returncode, text)
    return text


def spawn_detached(spec: DaemonSpec, *, marker: tuple[str, str]) -> int:
    """Start a daemon in its own session that outlives the caller; record its pid."""
    spec.log_file.parent.mkdir(parents=True, exist_ok=True)
    spec.pidfile.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **spec.env, marker[0]: marker[1]}
    with spec.log_file.open("ab") as out:
        proc = subprocess.Popen(  # detached on purpose; the pidfile tracks it
            spec.argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    spec.pidfile.write_text(f"{proc.pid}\n")
    log.info("process_started", component=spec.name, pid=proc.pid, log=str(spec.log_file))
    return proc.pid


def read_pidfile(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def pid_alive(pid: int) -> bool:
    """True if the process exists and is not a zombie."""
    return _state(pid) not in (None, "Z", "X")


def carries_marker(pid: int, marker: tuple[str, str]) -> bool:
    """True if the process is alive and its environment has the marker.

    Right after exec the kernel may briefly show an empty environ; callers that just
    started the process use ``pid_alive`` instead.
    """
    if not pid_alive(pid):
        return False
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{marker[0]}={marker[1]}".encode() in environ.split(b"\0")


def marked_pids(marker: tuple[str, str]) -> Iterator[int]:
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if (
            entry.name.isdigit()
            and int(entry.name) != me
            and carries_marker(int(entry.name), marker)
        ):
            yield int(entry.name)


def _signal(pid: int, sig: signal.Signals, *, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group and os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def _reap_child(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


async def stop_process(
    pid: int, *, marker: tuple[str, str], grace: float, sig: signal.Signals = signal.SIGTERM
) -> None:
    """Signal a marked process (and its group), wait up to ``grace``, then SIGKILL."""
    if not carries_marker(pid, marker):
        return
    _signal(pid, sig, group=True)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while loop.time() < deadline:
        _reap_child(pid)
        if not carries_marker(pid, marker):
            return
        await asyncio.sleep(0.1)
    log.warning("process_killed_after_grace", pid=pid, grace=grace)
    _signal(pid, signal.SIGKILL, group=True)
    for _ in range(50):
        _reap_child(pid)
        if _state(pid) in (None, "Z", "X"):
            return
        await asyncio.sleep(0.1)


async def reap_marked(marker: tuple[str, str], *, grace: float = 5.0) -> list[int]:
    """End every process carrying the marker: SIGTERM, then SIGKILL after ``grace``."""
    pids = list(marked_pids(marker))
    for pid in pids:
        _signal(pid, signal.SIGTERM, group=False)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while pids and loop.time() < deadline:
        await asyncio.sleep(0.1)
        for pid in pids:
            _reap_child(pid)
        pids = [p for p in pids if carries_marker(p, marker)]
    for pid in pids:
        log.warning("process_killed_by_reaper", pid=pid)
        _signal(pid, signal.SIGKILL, group=False)
    return pids


def pids_mentioning(path: Path) -> list[int]:
    """Processes whose command line names a path under ``path``.

    A pod's helpers can leave its process tree and environment behind (libvirt starts QEMU
    in a session of its own with a clean environment), but they still name files in the
    pod's directory; this finds them, as a kubelet finds them in the pod's cgroup.
    """
    needle = (str(path).rstrip("/") + "/").encode()
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "cmdline").read_bytes() and _state(int(entry.name)) not in (
                None,
                "Z",
                "X",
            ):
                found.append(int(entry.name))
    return found


async def reap_mentioning(path: Path, *, grace: float = 5.0) -> list[int]:
    """SIGTERM every process naming a path under ``path``, SIGKILL after ``grace``."""
    pids = pids_mentioning(path)
    for pid in pids:
        _signal(pid, signal.SIGTERM, group=False)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while pids and loop.time() < deadline:
        await asyncio.sleep(0.1)
        pids = [p for p in pids if _state(p) not in (None, "Z", "X")]
    for pid in pids:
        log.warning("process_killed_by_reaper", pid=pid, reason="names the pod dir")
        _signal(pid, signal.SIGKILL, group=False)
    return pids


def mounts_under(prefixes: list[Path]) -> list[str]:
    """Mount points in this mount namespace below any of the prefixes, deepest first."""
    found: list[str] = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            target = line.split()[4].replace("\\040", " ")
            if any(target == str(p) or target.startswith(f"{p}/") for p in prefixes):
                found.append(target)
    return sorted(found, key=len, reverse=True)
