"""A node of its own on the session cluster: the real handler daemon in-process against the
real kube-apiserver (its own Node object, so it sees only this test's VMIs), and real
launchers (real libvirtd, real QEMU, the real test guest) started the way their pods
start them — each launcher's sockets in `<pods>/<podUID>/volumes/kubernetes.io~
empty-dir/sockets`, its events pushed to the handler's notify socket.

The test plays the controller: it creates the VMI (through the admission webhooks, with
the controller's finalizer), starts its launcher, then hands the VMI to the node (status
Scheduled, `activePods`, the node label). `VMIView` watches the test's namespace and keeps
every status the handler wrote after that handoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from handler.actions import ActionsConfig
from handler.api import KubeApi
from handler.cgroups import LeftoverPartitions
from handler.config import Config, Timing
from handler.daemon import Handler
from handler.launchers import launcher_socket
from shared.kube import NODES, VMIS, KubeClient, NotFound, Registry
from shared.labels import VMI_FINALIZER
from shared.model import VirtualMachineInstance, VMIPhase
from tests.integration.controller.harness import release_finalizers
from tests.integration.handler.apiview import VMIView
from tests.integration.launcher.harness import Launcher, qemu_pids_under, tiny_vmi
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
    """One node: its Node object, its handler (restartable), its launchers, its VMIs."""

    def __init__(
        self,
        root: Path,
        *,
        kube: KubeClient,
        namespace: str,
        actions: ActionsConfig | None = None,
    ) -> None:
        self.root = root
        self.kube = kube
        self.namespace = namespace
        self.name = f"hnode-{uuid.uuid4().hex[:8]}"
        self.view = VMIView(kube, namespace)
        self.config = Config(
            node_name=self.name,
            pods_dir=root / "pods",
            notify_socket=root / "nodes" / self.name / "domain-notify.sock",
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

    # ---- the node on the cluster --------------------------------------------------------

    async def register(self) -> None:
        """The Node object (no kubelet behind it) and the watch on the test's VMIs."""
        await self.kube.create(NODES, {"apiVersion": "v1", "kind": "Node",
                                       "metadata": {"name": self.name}})  # fmt: skip
        await self.view.start()

    async def unregister(self) -> None:
        """The VMIs' finalizers dropped (as the controller would), the Node deleted."""
        await self.view.stop()
        await release_finalizers(self.kube, self.namespace)
        with contextlib.suppress(NotFound):
            await self.kube.delete(NODES, self.name)

    async def node_object(self) -> dict[str, Any]:
        return await self.kube.get(NODES, self.name)

    # ---- the handler --------------------------------------------------------------------

    async def start_handler(self) -> Handler:
        self._stop = asyncio.Event()
        handler = self.handler = Handler(self.config, api=KubeApi(self.kube), registry=Registry())
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
        """Create the VMI, start a launcher for it (as its pod would), hand it to this node."""
        body = tiny_vmi(name=name, terminationGracePeriodSeconds=grace)
        if kernel_args:
            body["spec"]["domain"]["firmware"]["kernelBoot"]["kernelArgs"] += " " + kernel_args
        body["metadata"] = {"name": name, "finalizers": [VMI_FINALIZER]}
        vmi = await self.kube.create(VMIS, body, namespace=self.namespace)
        pod_uid = str(uuid.uuid4())
        launcher = PodLauncher(
            root=self.root / name,
            vmi=vmi,
            grace=grace + 15,
            notify_socket=self.config.notify_socket,
            sockets_dir=launcher_socket(self.config.pods_dir, pod_uid).parent,
            pod_uid=pod_uid,
        )
        key = f"{self.namespace}/{name}"
        self.launchers[key] = launcher
        # The pod's `private` emptyDir, as the handler finds it (console socket).
        private = launcher.sockets_dir.parent / "private"
        launcher.private.mkdir(parents=True, exist_ok=True)
        private.parent.mkdir(parents=True, exist_ok=True)
        private.symlink_to(launcher.private)
        await asyncio.to_thread(launcher.start)
        status = {"phase": "Scheduled", "nodeName": self.name, "activePods": {pod_uid: self.name}}
        handed = await self.kube.patch(
            VMIS, name, {"status": status}, namespace=self.namespace, subresource="status"
        )
        self.view.record_after(handed)
        labels = {"metadata": {"labels": {"kubevirt.io/nodeName": self.name}}}
        await self.kube.patch(VMIS, name, labels, namespace=self.namespace)
        await until(lambda: key in self.view.latest, f"{key} seen", 30)
        return key

    async def delete_vmi(self, key: str) -> None:
        await self.kube.delete(VMIS, key.split("/", 1)[1], namespace=self.namespace)

    def vmi(self, key: str) -> VirtualMachineInstance:
        return VirtualMachineInstance.from_dict(self.view.latest[key])

    def history(self, key: str) -> list[dict[str, Any]]:
        """The statuses written after the handoff (by the handler), oldest first."""
        return self.view.history.get(key, [])

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
        self._sweep_killed_partitions()
        shutil.rmtree(self.root, ignore_errors=True)
        return leftovers

    def _sweep_killed_partitions(self, timeout: float = 10.0) -> None:
        """The cgroup partitions a SIGKILLed launcher left (its libvirt's machine cgroups):
        a node's handler sweeps them once it forgets the VMI, and this one has stopped.
        A killed QEMU leaves its cgroup when it is reaped, so this retries for a while."""
        sweeper = LeftoverPartitions()
        killed = [launcher for launcher in self.launchers.values() if launcher.sigkilled]
        uids = [str(launcher.vmi["metadata"]["uid"]) for launcher in killed]
        deadline = time.monotonic() + timeout
        while uids:
            uids = [uid for uid in uids if sweeper.sweep(uid)]
            if uids and time.monotonic() > deadline:
                raise AssertionError(f"cgroup partitions still busy for VMIs {uids}")
            if uids:
                time.sleep(0.2)


@contextlib.asynccontextmanager
async def on_cluster(n: Node) -> AsyncIterator[Node]:
    """Register the node, start its handler; afterwards stop it and check for leftovers."""
    await n.register()
    try:
        await n.start_handler()
        yield n
    finally:
        await n.stop_handler()
        leftovers = n.teardown()
        await n.unregister()
    assert not leftovers, f"QEMU left behind: {leftovers}"


def new_root() -> Path:
    return Path(tempfile.mkdtemp(prefix="kvh", dir="/tmp"))


def events(
    captured: Sequence[MutableMapping[str, Any]], name: str
) -> list[MutableMapping[str, Any]]:
    """Captured structlog events of one name."""
    return [e for e in captured if e.get("event") == name]
