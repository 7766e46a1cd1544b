"""The user's story on real nodes (kubelet + containerd + runc): kubevirt-py deployed from its
manifests (the production overlay with this machine's images), the demo VM booted from the
tiny-guest containerDisk/kernelBoot image, paused and unpaused with virtctl-py, scraped for
metrics, stopped and started; a SIGKILLed launcher makes its VMI Failed and the VM (runStrategy
Always) Running again with a new VMI. Live migration between real nodes, through the
handlers' migration proxy, is tests/integration/realnodes/test_migration.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.e2e.test_story import _assert_metrics, _assert_rbac_covers_calls

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[3]


def _wait(
    probe: Callable[[], Any],
    timeout: float,
    what: str,
    show: Callable[[], Any] | None = None,
    *,
    interval: float = 1.0,
) -> Any:
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        seen = probe()
        if seen:
            return seen
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what}; last: {show() if show else seen!r}"
    )


def _vmi(k: Kubectl, ns: str) -> dict[str, Any]:
    out = k("get", "vmi", "demo", "-n", ns, "-o", "json", check=False)
    return json.loads(out) if out else {}


def start_demo(k: Kubectl, ns: str) -> dict[str, Any]:
    """examples/vm-demo.yaml applied in `ns`; its VMI once Running."""
    vm = yaml.safe_load((REPO / "examples" / "vm-demo.yaml").read_text())
    vm["metadata"]["namespace"] = ns
    k("apply", "-f", "-", stdin=json.dumps(vm))
    return _wait(  # type: ignore[no-any-return]
        lambda: (v := _vmi(k, ns)).get("status", {}).get("phase") == "Running" and v,
        300, "demo VMI Running", lambda: _vmi(k, ns).get("status"),
    )  # fmt: skip


def _virtctl(kubeconfig: Path, ns: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "virtctl_py", "--kubeconfig", str(kubeconfig), "-n", ns, *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=240, cwd=REPO)


def _condition(vmi: dict[str, Any], kind: str) -> str:
    conds = vmi.get("status", {}).get("conditions", [])
    return next((c["status"] for c in conds if c["type"] == kind), "")


def _reasons(k: Kubectl, ns: str, uid: str) -> set[str]:
    """The reasons of the Events recorded on the object with this UID."""
    out = k("get", "events", "-n", ns, "--field-selector", f"involvedObject.uid={uid}",
            "-o", "json")  # fmt: skip
    return {e["reason"] for e in json.loads(out)["items"]}


def _described(k: Kubectl, ns: str, kind: str, reasons: set[str]) -> set[str]:
    """The reasons in `kubectl describe`'s Events of the demo object, once all of `reasons`."""

    def listed() -> set[str]:
        text = k("describe", kind, "demo", "-n", ns).split("\nEvents:")[-1]
        rows = (line.split() for line in text.splitlines())
        return {r[1] for r in rows if len(r) > 1 and r[0] in ("Normal", "Warning")}

    return _wait(  # type: ignore[no-any-return]
        lambda: reasons <= (seen := listed()) and seen,
        60,
        f"{kind} events {sorted(reasons)}",
        listed,
    )


def _pod_uid(vmi: dict[str, Any]) -> tuple[str, str]:
    node = vmi["status"]["nodeName"]
    (uid,) = [u for u, n in vmi["status"]["activePods"].items() if n == node]
    return node, uid


def _serial(cluster: Cluster, vmi: dict[str, Any]) -> str:
    """The guest's serial log, in the launcher pod's private emptyDir on its node."""
    node, uid = _pod_uid(vmi)
    log = Path(
        cluster.config.nodes_dir, node, "kubelet", "pods", uid, "volumes",
        "kubernetes.io~empty-dir", "private", "libvirt", "log", "kvpy", "serial.log",
    )  # fmt: skip
    return log.read_text(errors="replace") if log.exists() else ""


def _launcher_pid(vmi_uid: str) -> int:
    """The launcher's main process (PID 1 of its container), found from the host."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"virt-launcher-py") for a in argv[:2]) and vmi_uid.encode() in argv:
            return int(entry.name)
    raise AssertionError(f"no launcher process for VMI {vmi_uid}")


def _qemu_pids(domain: str) -> list[int]:
    """QEMU processes running the domain ``<namespace>_<name>``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"qemu-system" in argv[0] and f"guest={domain},".encode() in b" ".join(argv):
                found.append(int(entry.name))
    return found


def test_demo_vm_story_on_real_nodes(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """Deployed from the manifests onto kubelet nodes, the demo VM boots from its
    containerDisk image and prints its cloud-init user data on the console; pause/unpause
    through the aggregated API; the handler's metrics; SIGKILL of the launcher fails the VMI
    with a reason naming the launcher, QEMU dies with its container, and the VM runs again
    with a new VMI; stop and start; every API call the daemons made is allowed by their RBAC."""
    k, ns, kubeconfig = real_stack, real_namespace, real_cluster.kubeconfig
    vmi = start_demo(k, ns)
    serial = _wait(lambda: "KUBEVIRT-PY-USERDATA-END" in (t := _serial(real_cluster, vmi)) and t,
                   180, "console output", lambda: _serial(real_cluster, vmi)[-500:])  # fmt: skip
    assert "KUBEVIRT-PY-GUEST-BOOTED" in serial and "hello: from-kubevirt-py" in serial

    for verb, want in (("pause", "True"), ("unpause", "")):
        done = _virtctl(kubeconfig, ns, verb, "vm", "demo")
        assert done.returncode == 0, done.stderr
        _wait(lambda w=want: (_condition(_vmi(k, ns), "Paused") == "True") == bool(w), 60, verb)  # type: ignore[misc]

    _described(k, ns, "vmi", {"SuccessfulCreate", "Created", "Started", "Paused", "Resumed"})
    _described(k, ns, "vm", {"SuccessfulCreate"})
    _assert_metrics(k, vmi)

    first_uid = vmi["metadata"]["uid"]
    qemu = _qemu_pids(f"{ns}_demo")
    assert len(qemu) == 1, qemu
    os.kill(_launcher_pid(first_uid), signal.SIGKILL)
    failed = _wait(
        lambda: (v := _vmi(k, ns)).get("status", {}).get("phase") == "Failed" and v,
        60,
        "the VMI Failed after its launcher was killed",
        lambda: _vmi(k, ns).get("status"),
        interval=0.1,
    )
    assert failed["metadata"]["uid"] == first_uid
    assert "launcher" in json.dumps(failed["status"]).lower(), failed["status"]
    _wait(lambda: not Path(f"/proc/{qemu[0]}").exists(), 30, "QEMU gone with its container")
    again = _wait(
        lambda: (
            (v := _vmi(k, ns)).get("metadata", {}).get("uid") not in (None, first_uid)
            and v.get("status", {}).get("phase") == "Running"
            and v
        ),
        300,
        "a new VMI Running",
        lambda: _vmi(k, ns).get("status"),
    )
    assert again["metadata"]["uid"] != first_uid
    died = _wait(lambda: {"Stopped", "LauncherDied"} <= (r := _reasons(k, ns, first_uid)) and r,
                 60, "the failed VMI's events", lambda: _reasons(k, ns, first_uid))  # fmt: skip
    assert "Started" in died, died

    stopped = _virtctl(kubeconfig, ns, "stop", "demo", "--wait", "--timeout", "180")
    assert stopped.returncode == 0, stopped.stderr
    started = _virtctl(kubeconfig, ns, "start", "demo", "--wait", "--timeout", "300")
    assert started.returncode == 0, started.stderr
    _described(k, ns, "vm", {"SuccessfulCreate", "SuccessfulDelete"})
    _assert_rbac_covers_calls(k, ns)
