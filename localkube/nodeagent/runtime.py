"""Containers as processes: each in its own mount namespace with its volumes bind-mounted.

``unshare --mount --propagation private`` gives the container a private copy of the
host's mount table; a small sh prologue joins the container's cgroup (cgroups.py),
bind-mounts each volume at its mountPath and then execs the program, so the container's
pid is the program's pid. Mounts made there never reach the host and vanish with the
container's last process.

A data image's container (images.py) gets a root of its own instead of the host's: an
overlay whose lower layer is the image's directory in the store and whose upper layer (in
the pod dir) only receives the mount points, remounted read-only once its volumes are
bound inside; the program then runs under ``unshare --root``. The store is never written.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from localkube.nodeagent.cgroups import Cgroup
from localkube.procs import reap_marked

UNSHARE = ("unshare", "--mount", "--propagation", "private", "--")


@dataclass(frozen=True, slots=True, kw_only=True)
class Mount:
    source: Path
    target: str
    read_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RootView:
    """A data image's files as a container's root: ``image`` (the store's rootfs) under
    an overlay mounted at ``base/root``, with ``base/upper`` and ``base/work`` beside it."""

    image: Path
    base: Path

    @property
    def root(self) -> Path:
        return self.base / "root"

    def prepare(self) -> None:
        """Fresh, empty directories (a restarted container starts from the image again)."""
        shutil.rmtree(self.base, ignore_errors=True)
        for sub in ("root", "upper", "work"):
            (self.base / sub).mkdir(parents=True)

    def mount_lines(self) -> list[str]:
        for path in (self.image, self.base):
            if any(ch in str(path) for ch in ",:\\"):
                raise ValueError(f"{path}: cannot be an overlay layer path")
        options = (
            f"lowerdir={self.image},upperdir={self.base / 'upper'},workdir={self.base / 'work'}"
        )
        root = shlex.quote(str(self.root))
        return [
            f"mount -t overlay overlay -o {shlex.quote(options)} {root}",
            f"mkdir -p {root}/dev && mount --bind /dev {root}/dev",
        ]


def prologue(
    mounts: Sequence[Mount],
    workdir: str,
    *,
    cgroup_procs: Path | None = None,
    view: RootView | None = None,
) -> str:
    """The sh script run inside the new mount namespace before exec'ing the program.

    Every bind comes first, the read-only remounts after them: a bind mount inherits the
    read-only flag of the mount its source lies on, so a writable volume whose host path
    is below a read-only one (a subPath of the same host dir) must be bound before.
    With a root view, targets are inside it and the view itself is made read-only last.
    """
    lines = ["set -e"]
    if cgroup_procs is not None:
        lines.append(f"echo $$ > {shlex.quote(str(cgroup_procs))}")
    prefix = "" if view is None else str(view.root)
    if view is not None:
        lines += view.mount_lines()
    for m in mounts:
        src, dst = shlex.quote(str(m.source)), shlex.quote(prefix + m.target)
        if view is None and str(m.source) == m.target and not m.read_only:
            continue
        lines.append(
            f"if [ -d {src} ]; then mkdir -p {dst}; "
            f'else mkdir -p "$(dirname {dst})"; [ -e {dst} ] || : > {dst}; fi'
        )
        lines.append(f"mount --bind {src} {dst}")
    if view is not None:
        lines.append(f"mount -o remount,bind,ro {shlex.quote(prefix)}")
    for m in mounts:
        if m.read_only:
            lines.append(f"mount -o remount,bind,ro {shlex.quote(prefix + m.target)}")
    if view is not None:
        root, wd = shlex.quote(prefix), shlex.quote(workdir)
        lines.append(f'exec unshare --root={root} --wd={wd} -- "$@"')
        return "\n".join(lines)
    lines.append(f"mkdir -p {shlex.quote(workdir)} && cd {shlex.quote(workdir)}")
    lines.append('exec "$@"')
    return "\n".join(lines)


class ContainerProcess:
    """One running container process (session leader of its own process group), with
    what finds the rest of the container's processes: its cgroup, else its env marker."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        log_file: Path,
        *,
        cgroup: Cgroup | None,
        marker: tuple[str, str],
    ) -> None:
        self._proc = proc
        self.log_file = log_file
        self._cgroup = cgroup
        self._marker = marker

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
        marker: tuple[str, str],
        cgroup: Cgroup | None = None,
        view: RootView | None = None,
    ) -> ContainerProcess:
        """Start it; ``marker`` must be in ``env`` (it finds the processes without a cgroup)."""
        log_file.parent.mkdir(parents=True, exist_ok=True)
        if view is not None:
            view.prepare()
        procs = cgroup.procs_file if cgroup is not None else None
        script = prologue(mounts, workdir, cgroup_procs=procs, view=view)
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
        return cls(proc, log_file, cgroup=cgroup, marker=marker)

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
        """SIGKILL everything left in the container's process group and cgroup (one pass:
        end_leftovers makes sure)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        if self._cgroup is not None:
            self._cgroup.kill()

    async def end_leftovers(self, *, timeout: float = 10.0) -> list[int]:
        """After the main process ended, end every process the container left, as a
        runtime ends the container's cgroup: SIGKILL until its cgroup is empty, then remove
        it; without a cgroup, the processes carrying the container's env marker."""
        if self._cgroup is not None:
            return await self._cgroup.empty(timeout=timeout)
        return await reap_marked(self._marker, grace=0)

    def log_tail(self, lines: int = 5) -> str:
        try:
            with self.log_file.open("rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - 4096))
                return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""
