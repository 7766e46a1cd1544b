"""The demo behind ./scripts/up on the local cluster: a VirtualMachine through the whole
stack (controller → launcher pod → handler), its console's first lines, next steps."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONSOLE_MARKERS = (
    "KUBEVIRT-PY-GUEST-BOOTED",
    "KUBEVIRT-PY-USERDATA",
    "#cloud-config",
    "hello:",
    "KUBEVIRT-PY-TICK",
)


def kubectl(k: list[str], *args: str) -> str:
    return subprocess.run(
        [*k, *args], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def wait_running(k: list[str], name: str, timeout: float) -> dict[str, object]:
    deadline, last = time.monotonic() + timeout, ""
    while time.monotonic() < deadline:
        out = subprocess.run(
            [*k, "get", "vmi", name, "-o", "json"], capture_output=True, text=True, check=False
        )
        if out.returncode == 0:
            vmi = json.loads(out.stdout)
            phase = vmi.get("status", {}).get("phase", "")
            if phase != last:
                print(f"  vmi/{name}: {phase or 'Pending'}", flush=True)
                last = phase
            if phase == "Running":
                return dict(vmi)
            if phase in ("Failed", "Succeeded"):
                sys.exit(f"demo VM ended {phase}: {vmi.get('status', {}).get('reason', '')}")
        time.sleep(1)
    sys.exit(f"demo VM not Running after {timeout:g}s (last phase {last or 'none'})")


def serial_log(vmi: dict[str, object], nodes_dir: Path) -> Path:
    status = vmi["status"]
    assert isinstance(status, dict)
    ((pod_uid, node),) = dict(status["activePods"]).items()
    # A real node's kubelet dir is <nodes dir>/<node>/kubelet; a process-mode node's pods
    # sit right under <nodes dir>/<node>.
    for pods in (Path(nodes_dir, str(node), "kubelet", "pods"), Path(nodes_dir, str(node), "pods")):
        if pods.is_dir():
            break
    volumes = pods / str(pod_uid) / "volumes" / "kubernetes.io~empty-dir"
    return volumes / "private" / "libvirt" / "log" / "kvpy" / "serial.log"


def show_console(path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = path.read_text(errors="replace") if path.exists() else ""
        if "KUBEVIRT-PY-TICK 1" in text:
            break
        time.sleep(0.5)
    print("--- console (first lines, from the launcher's serial log) ---")
    for line in text.replace("\r", "").splitlines():
        if any(m in line for m in CONSOLE_MARKERS):
            print("  " + line)
    print("---")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--kubectl", required=True)
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--nodes-dir", type=Path, default=Path("/var/lib/kvpy"))
    p.add_argument("--timeout", type=float, default=180)
    args = p.parse_args()
    k = [args.kubectl, "--kubeconfig", args.kubeconfig]
    kubectl(k, "apply", "-f", str(REPO / "examples" / "vm-demo.yaml"))
    vmi = wait_running(k, "demo", args.timeout)
    show_console(serial_log(vmi, args.nodes_dir), args.timeout)


if __name__ == "__main__":
    main()
