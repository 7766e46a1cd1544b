"""devices.downwardMetrics, fed by the handler: for each VMI of this node that asks for it
and runs, a task dials the virtio-serial channel QEMU listens on (`DOWNWARD_METRICS_SOCKET`
in the launcher pod's private emptyDir, reached through the node's pods dir) and answers
the guest's requests, one at a time and at most one a second (KubeVirt's limit), with the
node's and the VMI's metrics (handler/vhostmd.py).

Every `interval` the informer's VMIs are walked: a new running VMI with the device gets a
task; a task ends when QEMU closes the channel (the guest is gone or restarted) or its
VMI no longer runs here, and a later walk dials again if it still does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from handler import vhostmd
from shared import podlayout
from shared.model import VirtualMachineInstance, VMIPhase
from shared.tasks import cancelling
from shared.wire.unixpath import short_path

log = structlog.get_logger("handler.downwardmetrics")

MAX_REQUEST = 4096  # a longer request line ends the channel (StreamReader's limit)
REQUEST_GAP = 1.0  # seconds between two answers (KubeVirt's one request a second)
CONNECT_TIMEOUT = 5.0
WRITE_TIMEOUT = 10.0


def channel_socket(pods_dir: Path, pod_uid: str) -> Path:
    """QEMU's end of the channel, as the node sees the launcher pod's private emptyDir."""
    private = pods_dir / pod_uid / podlayout.EMPTY_DIRS / podlayout.PRIVATE_VOLUME
    return private / podlayout.DOWNWARD_METRICS_SOCKET


@dataclass(slots=True, kw_only=True)
class DownwardMetrics:
    """The per-VMI channel tasks of this node."""

    node: str
    pods_dir: Path
    vmis: Callable[[], Iterable[VirtualMachineInstance]]
    interval: float = 2.0
    proc: Path = Path("/proc")
    request_gap: float = REQUEST_GAP
    serving: dict[str, asyncio.Task[None]] = field(default_factory=dict)  # uid → task

    def wanted(self) -> dict[str, tuple[VirtualMachineInstance, Path]]:
        """VMI uid → (VMI, channel socket) of every running VMI here asking for metrics."""
        out = {}
        for vmi in self.vmis():
            if vmi.spec.domain.devices.downward_metrics is None:
                continue
            if vmi.status.phase is not VMIPhase.RUNNING or vmi.status.node_name != self.node:
                continue
            pods = [uid for uid, node in vmi.status.active_pods.items() if node == self.node]
            sockets = [channel_socket(self.pods_dir, uid) for uid in pods]
            found = next((s for s in sockets if s.exists()), None)
            if found is not None:
                out[vmi.uid] = (vmi, found)
        return out

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
                await asyncio.sleep(self.interval)

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
                metrics = vhostmd.host_metrics(node=self.node, proc=self.proc)
                metrics += vhostmd.vm_metrics(vmi)
                reply = vhostmd.answer(line.decode(errors="replace"), vhostmd.render(metrics))
            writer.write(reply)
            async with asyncio.timeout(WRITE_TIMEOUT):  # QEMU's buffer: never full for long
                await writer.drain()
            await asyncio.sleep(self.request_gap)
