"""Runs the real launcher as a subprocess against the real test guest."""

from __future__ import annotations

import asyncio
import copy
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from handler.cgroups import LeftoverPartitions
from localkube.imagestore import ImageStore, default_root, fill_container_disks
from shared.podlayout import LAUNCHER_SOCKET
from shared.wire.client import RpcClient
from shared.wire.launcher_api import TIERS, Method

REPO = Path(__file__).resolve().parents[3]
EXAMPLE_VMI = REPO / "examples" / "vmi-tiny.yaml"
BOOT_MARKER = "KUBEVIRT-PY-GUEST-BOOTED"
TICK = "KUBEVIRT-PY-TICK"


def cache_dir() -> Path:
    return Path(os.environ.get("KUBEVIRT_PY_CACHE", Path.home() / ".cache" / "kubevirt-py"))


def tiny_vmi(*, name: str = "tiny", uid: str | None = None, **spec_changes: Any) -> dict[str, Any]:
    """The example VMI with a fresh uid; ``spec_changes`` replace top-level spec keys."""
    vmi: dict[str, Any] = copy.deepcopy(yaml.safe_load(EXAMPLE_VMI.read_text()))
    vmi["metadata"]["name"] = name
    vmi["metadata"]["uid"] = uid or str(uuid.uuid4())
    vmi["spec"].update(spec_changes)
    return vmi


@dataclass
class Launcher:
    """One launcher process and its directories."""

    root: Path
    vmi: dict[str, Any]
    grace: int = 10
    notify_socket: Path | None = None
    extra_args: tuple[str, ...] = ()
    # A command the launcher runs under (e.g. one that makes it a container).
    wrapper: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None
    log_path: Path = field(init=False)
    libvirtd_answered: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.log_path = self.root / "launcher.log"

    @property
    def sockets(self) -> Path:
        return self.root / "sockets"

    @property
    def private(self) -> Path:
        return self.root / "private"

    @property
    def container_disks(self) -> Path:
        """What the pod's init containers would have copied (filled at start)."""
        return self.root / "container-disks"

    @property
    def socket(self) -> Path:
        return self.sockets / LAUNCHER_SOCKET

    @property
    def serial_log(self) -> Path:
        return self.private / "libvirt" / "log" / "kvpy" / "serial.log"

    @property
    def libvirt_uri(self) -> str:
        return f"qemu+unix:///system?socket={self.private}/libvirt/sock/libvirt-sock"

    def argv(self) -> list[str]:
        meta = self.vmi["metadata"]
        args = [
            sys.executable, "-m", "launcher",
            "--name", meta["name"], "--namespace", meta["namespace"], "--uid", meta["uid"],
            "--sockets-dir", str(self.sockets), "--private-dir", str(self.private),
            "--container-disks-dir", str(self.container_disks),
            "--grace-period-seconds", str(self.grace), "--log-format", "console",
            "--kvm-probe-file", str(cache_dir() / "kvm-probe"),
            "--capabilities-seed", str(cache_dir() / "qemu-capabilities"),
        ]  # fmt: skip
        if self.notify_socket is not None:
            args += ["--notify-socket", str(self.notify_socket)]
        return [*self.wrapper, *args, *self.extra_args]

    def start(self, *, wait_ready: bool = True) -> None:
        self.libvirtd_answered = False  # a new launcher starts its own libvirtd
        self.root.mkdir(parents=True, exist_ok=True)
        fill_container_disks(ImageStore(default_root(os.environ)), self.vmi, self.container_disks)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv(), stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=REPO
            )
        if wait_ready:
            self.wait_ready()

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.socket.exists():
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"launcher exited {self.process.returncode}:\n{self.logs()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"launcher-sock missing after {timeout}s:\n{self.logs()}")
            time.sleep(0.05)

    def virsh(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """virsh against this launcher's libvirtd. The command socket is served while
        libvirtd still starts (launcher/cmdsocket.py), so the first call waits, bounded,
        for libvirtd to answer (once answered, it is not asked again)."""
        deadline = time.monotonic() + 60
        while not self.libvirtd_answered:
            probe = subprocess.run(
                ["virsh", "-c", self.libvirt_uri, "uri"], capture_output=True, text=True, timeout=30
            )
            if probe.returncode == 0:
                self.libvirtd_answered = True
            elif time.monotonic() > deadline:
                raise AssertionError(
                    f"libvirtd not answering after 60s: {probe.stderr}\n{self.logs()}"
                )
            else:
                time.sleep(0.1)
        return subprocess.run(
            ["virsh", "-c", self.libvirt_uri, *args],
            capture_output=True, text=True, check=check, timeout=60,
        )  # fmt: skip

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def serial(self) -> str:
        return self.serial_log.read_text(errors="replace") if self.serial_log.exists() else ""

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait; returns the exit code. The cgroup partitions it left (its QEMU
        still exiting when it removed them; on a node the handler sweeps those) go too."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout)
        sweep_partitions(str(self.vmi["metadata"]["uid"]))
        return code

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def sweep_partitions(vmi_uid: str, timeout: float = 10.0) -> None:
    """Remove the cgroup partitions the VMI's stopped launchers left, as a node's handler
    does (a running launcher's, a migration's other end, is left alone); a QEMU that is
    still exiting keeps its cgroup a moment, so this retries up to `timeout` seconds."""
    sweeper = LeftoverPartitions()
    deadline = time.monotonic() + timeout
    while sweeper.sweep(vmi_uid) and time.monotonic() < deadline:
        time.sleep(0.2)


async def call(launcher: Launcher, method: Method, args: Mapping[str, Any] | None = None) -> Any:
    async with RpcClient.connect(launcher.socket) as client:
        return await client.call(str(method), args or {}, tier=TIERS[method])


async def wait_for(
    predicate: Any, *, timeout: float, what: str, interval: float = 0.2, last: Any = None
) -> Any:
    """Poll an async or sync predicate until truthy; the failure says what was last seen."""
    deadline = time.monotonic() + timeout
    seen: Any = None
    while time.monotonic() < deadline:
        seen = predicate()
        if asyncio.iscoroutine(seen):
            seen = await seen
        if seen:
            return seen
        await asyncio.sleep(interval)
    detail = last() if callable(last) else seen
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last seen: {detail!r}")


async def domain_state(launcher: Launcher) -> tuple[str, str]:
    status = await call(launcher, Method.GET_DOMAIN)
    return status["state"], status["reason"]


def qemu_pids_under(root: Path) -> list[int]:
    """QEMU processes whose command line mentions this launcher's directory."""
    out = subprocess.run(["pgrep", "-f", "qemu-system"], capture_output=True, text=True)
    pids = []
    for pid in out.stdout.split():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(root) in cmdline:
            pids.append(int(pid))
    return pids
