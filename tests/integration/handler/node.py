"""A node without a cluster: the real handler daemon in-process against an in-memory API,
and real launchers (real libvirtd, real QEMU, the real test guest) started the way their
pods start them — each launcher's sockets in `<pods>/<podUID>/volumes/kubernetes.io~
empty-dir/sockets`, its events pushed to the handler's notify socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from handler.actions import ActionsConfig
from handler.config import Config, Timing
from handler.daemon import Handler
from handler.launchers import launcher_socket
from shared.kube import Registry
from shared.model import VirtualMachineInstance, VMIPhase
from tests.integration.launcher.harness import Launcher, qemu_pids_under, tiny_vmi
from tests.unit.handler.fakes import NODE, FakeApi
from tests.unit.handler.waiting import until

TIMING = Timing(
    heartbeat_interval=5.0,
    acpi_interval=2.0,
    ping_interval=1.0,
    stats_timeout=2.0,
    launcher_missing_timeout=10.0,
)
BOOT_TIMEOUT = 180.0
USER_DATA = "hello: from-kubevirt-py"


@dataclass
class PodLauncher(Launcher):
    """A launcher whose sockets dir is its pod's `sockets` emptyDir on the node.

    Its private dir stays short (in a pod it is mounted at /var/run/kubevirt-private),
    because libvirt's own socket lives below it and must fit in sun_path.
    """

    sockets_dir: Path = field(default_factory=Path)
    pod_uid: str = ""
    sigkilled: bool = False  # killed on purpose: its QEMU is expected to be left over

    def sigkill(self) -> None:
        """SIGKILL the launcher process alone (its libvirtd and QEMU stay, orphaned)."""
        assert self.process is not None
        self.sigkilled = True
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    @property
    def sockets(self) -> Path:
        return self.sockets_dir


def processes_under(root: Path) -> list[int]:
    """Processes (launcher, libvirtd, tini, QEMU) whose command line mentions `root`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if str(root).encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
    return found


class Node:
    """One node: its handler (restartable), its launchers, its in-memory API."""

    def __init__(self, root: Path, *, actions: ActionsConfig | None = None) -> None:
        self.root = root
        self.api = FakeApi()
        self.config = Config(
            node_name=NODE,
            pods_dir=root / "pods",
            notify_socket=root / "nodes" / NODE / "domain-notify.sock",
            kubeconfig=None,
            workers=4,
            listen_host="127.0.0.1",
            listen_port=0,
            devices=(Path("/dev/kvm"), Path("/dev/net/tun"), Path("/dev/vhost-net")),
            required_devices=(Path("/dev/net/tun"),),
            log_format="console",
            timing=TIMING,
            actions=actions,
        )
        self.launchers: dict[str, PodLauncher] = {}
        self.handler: Handler | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    # ---- the handler --------------------------------------------------------------------

    async def start_handler(self) -> Handler:
        self._stop = asyncio.Event()
        handler = self.handler = Handler(self.config, api=self.api, registry=Registry())
        self._task = asyncio.create_task(handler.run(self._stop), name="handler-under-test")
        await until(handler.ready, "handler ready", timeout=30)
        return handler

    async def stop_handler(self, *, crash: bool = False) -> None:
        """Stop it cleanly, or (crash) cancel it mid-flight as a SIGKILL would."""
        task, self._task = self._task, None
        if task is None:
            return
        if crash:
            task.cancel()
        else:
            self._stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    # ---- VMIs and their launchers ------------------------------------------------------

    async def add_vmi(self, *, name: str, grace: int = 20, kernel_args: str = "") -> str:
        """Start a launcher for a new VMI (as its pod would) and mark the VMI Scheduled."""
        vmi = tiny_vmi(name=name, terminationGracePeriodSeconds=grace)
        if kernel_args:
            vmi["spec"]["domain"]["firmware"]["kernelBoot"]["kernelArgs"] += " " + kernel_args
        pod_uid = str(uuid.uuid4())
        vmi["metadata"]["labels"] = {"kubevirt.io/nodeName": NODE}
        vmi["status"] = {"phase": "Scheduled", "nodeName": NODE, "activePods": {pod_uid: NODE}}
        launcher = PodLauncher(
            root=self.root / name,
            vmi=vmi,
            grace=grace + 15,
            notify_socket=self.config.notify_socket,
            sockets_dir=launcher_socket(self.config.pods_dir, pod_uid).parent,
            pod_uid=pod_uid,
        )
        key = f"{vmi['metadata']['namespace']}/{name}"
        self.launchers[key] = launcher
        # The pod's `private` emptyDir, as the handler finds it (console socket).
        private = launcher.sockets_dir.parent / "private"
        launcher.private.mkdir(parents=True, exist_ok=True)
        private.parent.mkdir(parents=True, exist_ok=True)
        private.symlink_to(launcher.private)
        await asyncio.to_thread(launcher.start)
        self.api.put_vmi(vmi)
        return key

    def vmi(self, key: str) -> VirtualMachineInstance:
        return self.api.vmi(key)

    async def wait_phase(self, key: str, phase: VMIPhase, timeout: float = BOOT_TIMEOUT) -> None:
        launcher = self.launchers[key]
        try:
            await until(lambda: self.vmi(key).status.phase is phase, f"{key} {phase}", timeout)
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}; status {self.vmi(key).status.to_dict()}\n"
                f"launcher log tail:\n{launcher.logs()[-3000:]}\nserial:\n{launcher.serial()[-1500:]}"
            ) from None

    async def wait_console(self, key: str, text: str, timeout: float = BOOT_TIMEOUT) -> None:
        launcher = self.launchers[key]
        try:
            await until(lambda: text in launcher.serial(), f"{text!r} on the console", timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; serial:\n{launcher.serial()[-2000:]}") from None

    def teardown(self) -> list[int]:
        """Stop every launcher and whatever it left; the QEMU pids that had to be killed."""
        leftovers: list[int] = []
        for launcher in self.launchers.values():
            try:
                launcher.terminate(timeout=60)
            except Exception:  # teardown must reach every launcher
                launcher.kill()
            if not launcher.sigkilled:
                leftovers += qemu_pids_under(launcher.root)
            for pid in processes_under(launcher.root):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)
        return leftovers


def new_root() -> Path:
    return Path(tempfile.mkdtemp(prefix="kvh", dir="/tmp"))


def events(
    captured: Sequence[MutableMapping[str, Any]], name: str
) -> list[MutableMapping[str, Any]]:
    """Captured structlog events of one name."""
    return [e for e in captured if e.get("event") == name]
