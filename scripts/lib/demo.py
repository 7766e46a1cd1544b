"""The launcher-only demo behind ./scripts/up: one real VM, its console, next steps.

Until the controller and handler run on the local cluster, the demo VM is driven the way
the handler will drive it: a launcher process, a Sync over its command socket.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from localkube.imagestore import ImageStore, default_root, fill_container_disks
from shared.podlayout import LAUNCHER_SOCKET
from shared.wire.client import RpcClient
from shared.wire.launcher_api import TIERS, Method

ROOT = Path(os.environ.get("KUBEVIRT_PY_DEMO_DIR", "/var/lib/kubevirt-py/demo"))
PIDFILE = ROOT / "launcher.pid"
SERIAL = ROOT / "private" / "libvirt" / "log" / "kvpy" / "serial.log"
CONSOLE_LINES = (
    "KUBEVIRT-PY-GUEST-BOOTED",
    "KUBEVIRT-PY-USERDATA",
    "#cloud-config",
    "hello:",
    "KUBEVIRT-PY-TICK",
)


def _running() -> int | None:
    try:
        pid = int(PIDFILE.read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def up(cache: Path) -> None:
    if _running() is not None:
        print(f"demo VM already running (launcher pid {_running()}); ./scripts/up --down stops it")
        return
    vmi = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    vmi["metadata"]["uid"] = str(uuid.uuid4())
    ROOT.mkdir(parents=True, exist_ok=True)
    for stale in ("sockets", "private", "container-disks"):
        shutil.rmtree(ROOT / stale, ignore_errors=True)
    # What a launcher pod's init containers copy out of the images (shared/podlayout.py).
    fill_container_disks(ImageStore(default_root(os.environ)), vmi, ROOT / "container-disks")
    log = (ROOT / "launcher.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "launcher", "--name", vmi["metadata"]["name"],
         "--namespace", vmi["metadata"]["namespace"], "--uid", vmi["metadata"]["uid"],
         "--sockets-dir", str(ROOT / "sockets"), "--private-dir", str(ROOT / "private"),
         "--container-disks-dir", str(ROOT / "container-disks"),
         "--kvm-probe-file", str(cache / "kvm-probe"), "--log-format", "console",
         "--capabilities-seed", str(cache / "qemu-capabilities")],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=REPO, start_new_session=True,
    )  # fmt: skip
    PIDFILE.write_text(str(proc.pid))
    deadline = time.monotonic() + 30
    while not (ROOT / "sockets" / LAUNCHER_SOCKET).exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"launcher did not become ready; see {ROOT / 'launcher.log'}")
        time.sleep(0.05)
    status = asyncio.run(_sync(vmi))
    print(
        f"demo VM {vmi['metadata']['namespace']}/{vmi['metadata']['name']}: domain {status['state']}"
    )
    _show_console()


async def _sync(vmi: dict[str, object]) -> dict[str, object]:
    async with RpcClient.connect(ROOT / "sockets" / LAUNCHER_SOCKET) as client:
        result: dict[str, object] = await client.call("sync", {"vmi": vmi}, tier=TIERS[Method.SYNC])
        return result


def _show_console(timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = SERIAL.read_text(errors="replace") if SERIAL.exists() else ""
        if "KUBEVIRT-PY-TICK 1" in text:
            break
        time.sleep(0.5)
    else:
        sys.exit(f"no boot marker on the console after {timeout:g}s; see {SERIAL}")
    print("--- console (first lines) ---")
    for line in text.splitlines():
        if any(marker in line for marker in CONSOLE_LINES) or line.startswith("hello"):
            print("  " + line)
    print("---")


def down() -> None:
    pid = _running()
    if pid is None:
        print("no demo VM running")
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while _running() is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    print("demo VM shut down (ACPI) and its launcher stopped")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", choices=["up", "down"])
    parser.add_argument("--cache", type=Path, required=True)
    args = parser.parse_args()
    up(args.cache) if args.command == "up" else down()


if __name__ == "__main__":
    main()
