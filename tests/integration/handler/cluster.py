"""The handler on the local cluster: `python -m handler` as a real subprocess per node, with
the real controller rendering real launcher pods that boot the real guest.

The notify hostPath is private to the test session (`/run/kvpy-h<pid>/nodes`, mounted
in the launcher container at /var/run/kubevirt-py as the contract says), so a demo
cluster's handlers on this machine are never disturbed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from localkube.cluster import Cluster
from localkube.config import REPO
from localkube.health import log_tail
from shared.kube import AlreadyExists, KubeClient, NotFound, Resource, TooManyRequests
from shared.kube.resources import VMIS
from shared.model.crd import KINDS, build_crd
from tests.integration.controller.harness import free_port, health_get, scrape_metric
from tests.integration.launcher.harness import cache_dir
from tests.unit.handler.waiting import until_async

CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
LAUNCHER_IMAGE = "registry.local/kubevirt-py/virt-launcher:dev"
# Launchers share the capability cache the bare-launcher tests use (no QEMU probe per start).
CAPABILITIES_SEED = cache_dir() / "qemu-capabilities"


def notify_root() -> Path:
    """This session's stand-in for the nodes' /var/run/kubevirt-py (short: socket paths)."""
    return Path(f"/run/kvpy-h{os.getpid()}")


async def install_crds(kube: KubeClient) -> None:
    """The kubevirt.io CRDs (generated from the model) are installed and served."""
    for info in KINDS:
        with contextlib.suppress(AlreadyExists):
            await kube.create(CRDS, build_crd(info))

    async def served() -> bool:
        try:
            await kube.list(VMIS, namespace="default")
        except (NotFound, TooManyRequests):  # until the CRD is established and its storage up
            return False
        return True

    await until_async(served, "kubevirt.io CRDs served", timeout=60, interval=0.5)


def controller_args(root: Path) -> list[str]:
    """Controller flags that make it render real launcher pods for this session."""
    return [
        "--launcher-image", LAUNCHER_IMAGE,
        "--launcher-command", "",
        "--notify-host-dir", str(root / "nodes"),
        "--log-format", "console",
        "--capabilities-seed", str(CAPABILITIES_SEED),
    ]  # fmt: skip


@dataclass
class HandlerProcess:
    """`python -m handler` for one node of the cluster."""

    cluster: Cluster
    node: str
    root: Path
    log_path: Path
    port: int = field(default_factory=free_port)
    proc: asyncio.subprocess.Process | None = None

    @property
    def pods_dir(self) -> Path:
        return self.cluster.config.nodes_dir / self.node / "pods"

    @property
    def notify_socket(self) -> Path:
        return self.root / "nodes" / self.node / "domain-notify.sock"

    def argv(self) -> list[str]:
        return [
            sys.executable, "-m", "handler",
            "--node-name", self.node,
            "--kubeconfig", str(self.cluster.kubeconfig),
            "--pods-dir", str(self.pods_dir),
            "--notify-socket", str(self.notify_socket),
            "--device-plugins-dir", str(self.cluster.config.device_plugins_dir(self.node)),
            "--listen-host", "127.0.0.1",
            "--listen-port", str(self.port),
            "--heartbeat-interval", "5",
            "--acpi-interval", "2",
            "--ping-interval", "1",
            "--log-format", "console",
        ]  # fmt: skip

    async def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with self.log_path.open("ab") as out:
            proc = self.proc = await asyncio.create_subprocess_exec(
                *self.argv(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

        async def ready() -> bool:
            if proc.returncode is not None:
                raise AssertionError(f"handler exited {proc.returncode}:\n{self.log_tail()}")
            return (await self.get("/readyz"))[0] == 200

        await until_async(ready, "handler /readyz", timeout=60, interval=0.2)

    async def get(self, path: str) -> tuple[int, str]:
        return await health_get(self.port, path)

    async def metric(self, name: str, **labels: str) -> float:
        return await scrape_metric(self.port, name, labels)

    async def stop(self, sig: signal.Signals = signal.SIGTERM) -> int | None:
        """Signal it and wait (SIGKILL after 20 s); its exit code."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return proc.returncode if proc else None
        proc.send_signal(sig)
        try:
            async with asyncio.timeout(20):
                return await proc.wait()
        except TimeoutError:
            proc.kill()
            return await proc.wait()

    async def sigkill(self) -> None:
        """SIGKILL, as a crash would (no shutdown path runs)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        return log_tail(self.log_path, lines)


def pod_volume(handler: HandlerProcess, pod_uid: str, volume: str) -> Path:
    """A launcher pod's emptyDir on the node."""
    return handler.pods_dir / pod_uid / "volumes" / "kubernetes.io~empty-dir" / volume


def serial_log(handler: HandlerProcess, pod_uid: str) -> str:
    path = pod_volume(handler, pod_uid, "private") / "libvirt" / "log" / "kvpy" / "serial.log"
    return path.read_text(errors="replace") if path.exists() else ""


class SerialFollower:
    """Keeps a launcher's serial log open, so it stays readable after its pod is cleaned up."""

    def __init__(self, handler: HandlerProcess, pod_uid: str) -> None:
        path = pod_volume(handler, pod_uid, "private") / "libvirt" / "log" / "kvpy" / "serial.log"
        self._file = path.open("rb")
        self._seen = b""

    def text(self) -> str:
        self._seen += self._file.read()
        return self._seen.decode(errors="replace")

    def close(self) -> None:
        self._file.close()


def qemu_pid(handler: HandlerProcess, pod_uid: str) -> int | None:
    """The QEMU pid libvirt recorded in the launcher pod's private dir (`<domain>.pid`;
    `driver.pid` beside it is libvirtd's own)."""
    run = pod_volume(handler, pod_uid, "private") / "libvirt" / "run" / "qemu"
    for pidfile in run.glob("*.pid"):
        if pidfile.name == "driver.pid":
            continue
        with contextlib.suppress(ValueError, OSError):
            return int(pidfile.read_text().strip())
    return None
