"""The node side: volumes published into the kubelet's target paths, in the node's own
mount namespace (the driver runs there, as the node's kubelet does).

- filesystem volume: the volume's directory bind-mounted on the target directory;
- block volume: a loop device over the volume's sparse file, bind-mounted on the target
  file the kubelet names (loop devices are the host's; each publish has its own, recorded
  in the node's state directory so unpublish and expansion find it again).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

import structlog

from localkube.csi.errors import Code, CsiError
from localkube.csi.store import Store, VolumeMeta
from localkube.errors import CommandFailed
from localkube.procs import run_cmd

log = structlog.get_logger()
CMD_TIMEOUT = 30.0


def mounted(target: Path, mountinfo: str) -> bool:
    """Whether `target` is a mount point in this mount namespace's mountinfo text."""
    want = str(target).replace(" ", "\\040")
    return any(line.split()[4] == want for line in mountinfo.splitlines() if line.strip())


def loops_of(backing: Path, sys_block: Path = Path("/sys/block")) -> list[str]:
    """The loop devices (``/dev/loopN``) over `backing`, from sysfs."""
    found = []
    for entry in sorted(sys_block.glob("loop*/loop/backing_file")):
        with contextlib.suppress(OSError):
            if entry.read_text().strip().removesuffix(" (deleted)") == str(backing):
                found.append(f"/dev/{entry.parent.parent.name}")
    return found


class NodeVolumes:
    def __init__(self, *, store: Store, state_dir: Path) -> None:
        self.store = store
        self.state_dir = state_dir

    def _record(self, target: str) -> Path:
        return self.state_dir / f"{hashlib.sha256(target.encode()).hexdigest()[:24]}.json"

    def _is_mounted(self, target: Path) -> bool:
        return mounted(target, Path("/proc/self/mountinfo").read_text())

    async def publish(self, *, volume_id: str, target: Path, block: bool, readonly: bool) -> None:
        meta = self.store.volume(volume_id)
        if meta.block != block:
            kind = "block" if meta.block else "filesystem"
            raise CsiError(
                Code.INVALID_ARGUMENT, f"volume {volume_id} is a {kind} volume: wrong access type"
            )
        if self._is_mounted(target):
            return
        source = await (self._attach(meta, target) if block else self._directory(meta, target))
        await _run(["mount", "--bind", source, str(target)])
        if readonly:
            await _run(["mount", "-o", "remount,bind,ro", str(target)])
        log.info("volume_published", volume=volume_id, target=str(target), source=source)

    async def _directory(self, meta: VolumeMeta, target: Path) -> str:
        target.mkdir(parents=True, exist_ok=True)
        return str(self.store.data_path(meta))

    async def _attach(self, meta: VolumeMeta, target: Path) -> str:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
        record = self._record(str(target))
        if record.exists():
            loop = str(json.loads(record.read_text())["loop"])
            if Path(loop).exists():
                return loop
        out = await _run(["losetup", "--find", "--show", str(self.store.data_path(meta))])
        loop = out.strip()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"loop": loop, "volume": meta.id, "target": str(target)}))
        return loop

    async def unpublish(self, *, volume_id: str, target: Path) -> None:
        if self._is_mounted(target):
            await _run(["umount", str(target)])
        record = self._record(str(target))
        if record.exists():
            loop = str(json.loads(record.read_text())["loop"])
            with contextlib.suppress(CsiError):  # already detached
                await _run(["losetup", "--detach", loop])
            record.unlink()
        if target.is_dir():
            with contextlib.suppress(OSError):
                target.rmdir()
        elif target.exists():
            target.unlink()
        log.info("volume_unpublished", volume=volume_id, target=str(target))

    async def expand(self, *, volume_id: str) -> int:
        """The volume's loop devices on this node told their file grew; its capacity."""
        meta = self.store.volume(volume_id)
        if meta.block:
            for record in self.state_dir.glob("*.json"):
                info = json.loads(record.read_text())
                if info.get("volume") == volume_id:
                    await _run(["losetup", "--set-capacity", str(info["loop"])])
        log.info("volume_expanded_on_node", volume=volume_id, capacity=meta.capacity)
        return meta.capacity

    def usage(self, path: Path) -> tuple[int, int, int]:
        """(total, used, available) bytes of the filesystem at `path`."""
        st = os.statvfs(path)
        total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        return total, total - free, free


async def _run(argv: list[str]) -> str:
    try:
        return await run_cmd(argv, timeout=CMD_TIMEOUT)
    except CommandFailed as exc:
        raise CsiError(Code.INTERNAL, str(exc)) from None
