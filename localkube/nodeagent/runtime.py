"""Containers as processes: each in its own mount namespace with its volumes bind-mounted.

``unshare --mount --propagation private`` gives the container a private copy of the
host's mount table; a small sh prologue bind-mounts each volume at its mountPath and
then execs the program, so the container's pid is the program's pid. Mounts made there
never reach the host and vanish with the container's last process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

UNSHARE = ("unshare", "--mount", "--propagation", "private", "--")


@dataclass(frozen=True, slots=True, kw_only=True)
class Mount:
    source: Path
    target: str
    read_only: bool = False


def prologue(mounts: Sequence[Mount], workdir: str) -> str:
    """The sh script run inside the new mount namespace before exec'ing the program.

    Every bind comes first, the read-only remounts after them: a bind mount inherits the
    read-only flag of the mount its source lies on, so a writable volume whose host path
    is below a read-only one (a subPath of the same host dir) must be bound before.
    """
    lines = ["set -e"]
    for m in mounts:
        src, dst = shlex.quote(str(m.source)), shlex.quote(m.target)
        if str(m.source) == m.target and not m.read_only:
            continue
        lines.append(
            f"if [ -d {src} ]; then mkdir -p {dst}; "
            f'else mkdir -p "$(dirname {dst})"; [ -e {dst} ] || : > {dst}; fi'
        )
        lines.append(f"mount --bind {src} {dst}")
    for m in mounts:
        if m.read_only:
            lines.append(f"mount -o remount,bind,ro {shlex.quote(m.target)}")
    lines.append(f"mkdir -p {shlex.quote(workdir)} && cd {shlex.quote(workdir)}")
    lines.append('exec "$@"')
    return "\n".join(lines)


class ContainerProcess:
    """One running container process (session leader of its own process group)."""

    def __init__(self, proc: asyncio.subprocess.Process, log_file: Path) -> None:
        self._proc = proc
        self.log_file = log_file

    @property
    def pid(self) -> int:
        return self._proc.pid

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        mounts: Sequence[Mount],
        workdir: str,
        log_file: Path,
    ) -> ContainerProcess:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        script = prologue(mounts, workdir)
        with log_file.open("ab") as out:
            proc = await asyncio.create_subprocess_exec(
                *UNSHARE,
                "/bin/sh",
                "-c",
                script,
                "container",
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                env=dict(env),
                cwd="/",
                start_new_session=True,
            )
        return cls(proc, log_file)

    async def wait(self) -> int:
        """The exit code as a container runtime reports it (128+N for signal N)."""
        code = await self._proc.wait()
        return 128 - code if code < 0 else code

    @property
    def exited(self) -> bool:
        return self._proc.returncode is not None

    def signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def kill_group(self) -> None:
        """SIGKILL everything left in the container's process group."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def log_tail(self, lines: int = 5) -> str:
        try:
            with self.log_file.open("rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - 4096))
                return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
