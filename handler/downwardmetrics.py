"""devices.downwardMetrics, fed by the handler: for each VMI of this node that asks for it
and runs, a task dials the virtio-serial channel QEMU listens on (`DOWNWARD_METRICS_SOCKET`
in the launcher pod's private emptyDir, reached through the node's pods dir) and answers
the guest's requests, one at a time and at most one a second (KubeVirt's limit), with the
node's and the VMI's metrics (handler/vhostmd.py).

Every `interval` the informer's VMIs are walked: a new running VMI with the device gets a
task; a task ends when QEMU closes the channel (the guest is gone or restarted) or its
VMI no longer runs here, and a later walk dials again if it still does.

A downwardMetrics *volume* is a vhostmd disk the launcher made in its private emptyDir
(`podlayout.DOWNWARD_METRICS_DISK`); every `disk_interval` the walk rewrites it with the
same document (shared/vhostmddisk.py). The pod owns that directory, so each component is
opened without following symlinks and only a regular file is written: a launcher cannot
point the root handler's write anywhere else.
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from handler import vhostmd
from shared import podlayout, vhostmddisk
from shared.model import VirtualMachineInstance, VMIPhase
from shared.tasks import cancelling
from shared.wire.unixpath import short_path

log = structlog.get_logger("handler.downwardmetrics")

MAX_REQUEST = 4096  # a longer request line ends the channel (StreamReader's limit)
REQUEST_GAP = 1.0  # seconds between two answers (KubeVirt's one request a second)
CONNECT_TIMEOUT = 5.0
WRITE_TIMEOUT = 10.0
DISK_INTERVAL = 5.0  # seconds between two rewrites of a vhostmd disk


def private_dir(pods_dir: Path, pod_uid: str) -> Path:
    """The launcher pod's private emptyDir, as the node sees it."""
    return pods_dir / pod_uid / podlayout.EMPTY_DIRS / podlayout.PRIVATE_VOLUME


def channel_socket(pods_dir: Path, pod_uid: str) -> Path:
    """QEMU's end of the channel, as the node sees the launcher pod's private emptyDir."""
    return private_dir(pods_dir, pod_uid) / podlayout.DOWNWARD_METRICS_SOCKET


def write_disk(private: Path, document: bytes) -> None:
    """Rewrite the pod's vhostmd disk under `private`, following no symlink."""
    flags = os.O_NOFOLLOW | os.O_CLOEXEC
    top = os.open(private, os.O_PATH | os.O_DIRECTORY | flags)
    try:
        sub = os.open(
            podlayout.DOWNWARD_METRICS_DIR, os.O_PATH | os.O_DIRECTORY | flags, dir_fd=top
        )
        try:
            fd = os.open(podlayout.DOWNWARD_METRICS_DISK.name, os.O_WRONLY | flags, dir_fd=sub)
        finally:
            os.close(sub)
    finally:
        os.close(top)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{podlayout.DOWNWARD_METRICS_DISK} is not a regular file")
        vhostmddisk.write(fd, document)
    finally:
        os.close(fd)


@dataclass(slots=True, kw_only=True)
class DownwardMetrics:
    """The per-VMI channel tasks of this node."""

    node: str
    pods_dir: Path
    vmis: Callable[[], Iterable[VirtualMachineInstance]]
    interval: float = 2.0
    proc: Path = Path("/proc")
    request_gap: float = REQUEST_GAP
    disk_interval: float = DISK_INTERVAL
    clock: Callable[[], float] = time.monotonic
    written: dict[str, float] = field(default_factory=dict)  # uid → last disk write
    serving: dict[str, asyncio.Task[None]] = field(default_factory=dict)  # uid → task

    def wanted(self) -> dict[str, tuple[VirtualMachineInstance, Path]]:
        """VMI uid → (VMI, channel socket) of every running VMI here asking for metrics."""
        out = {}
        for vmi in self._running():
            if vmi.spec.domain.devices.downward_metrics is None:
                continue
            pods = [uid for uid, node in vmi.status.active_pods.items() if node == self.node]
            sockets = [channel_socket(self.pods_dir, uid) for uid in pods]
            found = next((s for s in sockets if s.exists()), None)
            if found is not None:
                out[vmi.uid] = (vmi, found)
        return out

    def _running(self) -> list[VirtualMachineInstance]:
        return [
            v
            for v in self.vmis()
            if v.status.phase is VMIPhase.RUNNING and v.status.node_name == self.node
        ]

    async def run(self) -> None:
        """Walk the VMIs every `interval` until cancelled; the tasks end with it."""
        async with asyncio.TaskGroup() as tg:
            while True:
                wanted = self.wanted()
                for uid, task in list(self.serving.items()):
                    if task.done() or uid not in wanted:
                        task.cancel()
                        del self.serving[uid]
                for uid, (vmi, socket) in wanted.items():
                    if uid not in self.serving:
                        self.serving[uid] = tg.create_task(
                            self._serve(vmi, socket), name=f"downward-metrics-{uid}"
                        )
                await self._write_disks()
                await asyncio.sleep(self.interval)

    def _document(self, vmi: VirtualMachineInstance) -> bytes:
        metrics = vhostmd.host_metrics(node=self.node, proc=self.proc) + vhostmd.vm_metrics(vmi)
        return vhostmd.render(metrics)

    def disks(self) -> dict[str, tuple[VirtualMachineInstance, Path]]:
        """VMI uid → (VMI, private dir) of every running VMI here with a metrics volume."""
        out = {}
        for vmi in self._running():
            if not any(v.downward_metrics is not None for v in vmi.spec.volumes):
                continue
            for uid, node in vmi.status.active_pods.items():
                private = private_dir(self.pods_dir, uid)
                if node == self.node and (private / podlayout.DOWNWARD_METRICS_DISK).exists():
                    out[vmi.uid] = (vmi, private)
        return out

    async def _write_disks(self) -> None:
        now = self.clock()
        disks = self.disks()
        self.written = {u: t for u, t in self.written.items() if u in disks}
        for uid, (vmi, private) in disks.items():
            if now - self.written.get(uid, -self.disk_interval) < self.disk_interval:
                continue
            self.written[uid] = now
            body = self._document(vmi).rstrip(b"\n") + b"\n"
            try:
                async with asyncio.timeout(WRITE_TIMEOUT):
                    await asyncio.to_thread(write_disk, private, body)
            except (OSError, ValueError, TimeoutError) as exc:
                if cancelling():
                    raise
                log.warning("downward_metrics_disk_not_written", vmi=vmi.key, error=str(exc))

    async def _serve(self, vmi: VirtualMachineInstance, socket: Path) -> None:
        """One channel, from dial to close; its errors end it, never its siblings."""
        with structlog.contextvars.bound_contextvars(vmi=vmi.key):
            try:
                with short_path(socket) as path:
                    async with asyncio.timeout(CONNECT_TIMEOUT):
                        reader, writer = await asyncio.open_unix_connection(path, limit=MAX_REQUEST)
            except (OSError, TimeoutError) as exc:
                if cancelling():
                    raise
                log.info("downward_metrics_dial_failed", error=str(exc))
                return
            log.info("downward_metrics_channel_open")
            try:
                await self._answer(vmi, reader, writer)
            except Exception as exc:  # a task boundary: this channel ends, a walk redials
                if cancelling():
                    raise
                log.warning("downward_metrics_channel_failed", error=str(exc))
            finally:
                writer.close()
            log.info("downward_metrics_channel_closed")

    async def _answer(
        self,
        vmi: VirtualMachineInstance,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        """Requests until QEMU closes the channel: a line, a blank line, the reply."""
        while True:
            line = await reader.readline()
            if not line:
                return
            blank = await reader.readline()
            if not blank:
                return
            if blank.strip():
                reply = vhostmd.INVALID
            else:
                reply = vhostmd.answer(line.decode(errors="replace"), self._document(vmi))
            writer.write(reply)
            async with asyncio.timeout(WRITE_TIMEOUT):  # QEMU's buffer: never full for long
                await writer.drain()
            await asyncio.sleep(self.request_gap)
