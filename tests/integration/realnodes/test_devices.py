"""The guest's devices, clock and console log on real nodes, on one tiny guest: inputs,
video, sound, an i6300esb watchdog, an ISA panic device and a clock with timers reach QEMU;
the launcher pod's guest-console-log container streams the boot while `virtctl-py console`
works; the watchdog expiring (action reset) is reported as an Event and the guest boots
again; a kernel panic fails the VMI (GuestCrashed) with its Event, and the pod completes
(the log follower ends with the launcher)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.conftest import pods
from tests.integration.realnodes.test_platform import _qemu_cmdline
from tests.integration.realnodes.test_remote_access import _stop, virtctl_py
from tests.integration.realnodes.test_story import REPO, _serial, _wait

pytestmark = pytest.mark.cluster
NAME = "devices"
BOOTED = "KUBEVIRT-PY-GUEST-BOOTED"
TICK = b"KUBEVIRT-PY-TICK"


def _vmi() -> dict[str, Any]:
    vmi: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    vmi["metadata"] = {"name": NAME}
    vmi["spec"]["terminationGracePeriodSeconds"] = 0
    domain = vmi["spec"]["domain"]
    domain["firmware"]["kernelBoot"]["kernelArgs"] = "console=ttyS0 quiet"
    domain["clock"] = {
        "utc": {"offsetSeconds": 3600},
        "timer": {"rtc": {"tickPolicy": "catchup"}, "pit": {"tickPolicy": "delay"}},
    }
    domain["devices"].update(
        inputs=[{"name": "tablet", "type": "tablet", "bus": "usb"},
                {"name": "keyboard", "type": "keyboard", "bus": "virtio"}],
        video={"type": "virtio"},
        sound={"name": "audio", "model": "ich9"},
        watchdog={"name": "wd", "i6300esb": {"action": "reset"}},
        panicDevices=[{"model": "isa"}],
        logSerialConsole=True,
    )  # fmt: skip
    return vmi


class Console:
    """`virtctl-py console` on a pseudo-terminal: read until a marker, type a line."""

    def __init__(self, argv: list[str]) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, cwd=REPO, start_new_session=True
        )
        os.close(slave)
        self.seen = b""

    def until(self, marker: bytes, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        start = len(self.seen)
        while marker not in self.seen[start:]:
            left = deadline - time.monotonic()
            assert left > 0, f"no {marker!r} on the console: {self.seen[-800:]!r}"
            if not select.select([self.master], [], [], min(left, 1.0))[0]:
                continue
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # EIO: the other side closed
                chunk = b""
            assert chunk, f"console ended (rc {self.proc.poll()}): {self.seen[-800:]!r}"
            self.seen += chunk

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def close(self) -> None:
        _stop(self.proc)  # type: ignore[arg-type]
        os.close(self.master)


def _events(k: Kubectl, ns: str) -> list[dict[str, Any]]:
    out = k("get", "events", "-n", ns, "--field-selector", f"involvedObject.name={NAME}",
            "-o", "json")  # fmt: skip
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def _event(k: Kubectl, ns: str, reason: str) -> dict[str, Any] | None:
    return next((e for e in _events(k, ns) if e.get("reason") == reason), None)


@dataclass(frozen=True)
class Guest:
    """The test's one VMI: its namespace, kubectl, and what the checks read of it."""

    cluster: Cluster
    k: Kubectl
    ns: str

    def vmi(self) -> dict[str, Any]:
        out = self.k("get", "vmi", NAME, "-n", self.ns, "-o", "json", check=False)
        return json.loads(out) if out else {}

    def phase(self, phase: str) -> dict[str, Any] | None:
        v = self.vmi()
        return v if v.get("status", {}).get("phase") == phase else None

    def console_log(self, pod: str) -> str:
        out = self.k("logs", "-n", self.ns, pod, "-c", "guest-console-log", check=False)
        return out or ""

    def console(self) -> Console:
        return Console(virtctl_py(self.cluster.kubeconfig, self.ns, "console", NAME))

    def event(self, reason: str, timeout: float) -> dict[str, Any]:
        found: dict[str, Any] = _wait(
            lambda: _event(self.k, self.ns, reason), timeout, f"{reason} Event",
            lambda: [e.get("reason") for e in _events(self.k, self.ns)],
        )  # fmt: skip
        return found


def _boots_with_its_devices(g: Guest) -> str:
    """Running, booted, each device in QEMU, the boot in guest-console-log; the pod's name."""
    running = _wait(lambda: g.phase("Running"), 300, "devices VMI Running",
                    lambda: g.vmi().get("status"))  # fmt: skip
    _wait(lambda: BOOTED in _serial(g.cluster, running), 240, "the guest's boot",
          lambda: _serial(g.cluster, running)[-800:])  # fmt: skip
    cmdline = _qemu_cmdline(f"guest={g.ns}_{NAME}")
    for device in ("usb-tablet", "virtio-keyboard", "virtio-vga", "ich9-intel-hda",
                   "i6300esb", "pvpanic", "driftfix=slew"):  # fmt: skip
        assert device in cmdline, (device, cmdline)
    (pod,) = pods(g.k, g.ns, "kubevirt.io=virt-launcher")
    pod_name = str(pod["metadata"]["name"])  # type: ignore[index]
    containers = [c["name"] for c in pod["spec"]["containers"]]  # type: ignore[index]
    assert containers == ["compute", "guest-console-log"]
    _wait(lambda: BOOTED in g.console_log(pod_name), 120, "the boot in guest-console-log",
          lambda: g.console_log(pod_name)[-800:])  # fmt: skip
    return pod_name


def _watchdog_resets(g: Guest, pod: str) -> None:
    """Armed from the console, the watchdog expires: an Event, the guest boots again."""
    console = g.console()
    try:
        console.until(TICK, 120)
        console.type("kvpy-watchdog")
        console.until(b"KUBEVIRT-PY-WATCHDOG-ARMED", 120)
        fired = g.event("WatchdogExpired", 180)
        assert "action reset" in fired["message"], fired
        _wait(lambda: g.console_log(pod).count(BOOTED) >= 2, 240, "the guest booting again",
              lambda: g.console_log(pod)[-800:])  # fmt: skip
        assert g.vmi()["status"]["phase"] == "Running"
    finally:
        console.close()


def _panic_fails_it(g: Guest, pod: str) -> None:
    """A kernel panic typed on the console: Failed (GuestCrashed) with its Event, and the
    launcher pod completes (the log follower ended with the launcher)."""
    console = g.console()
    # guest-console-log followed from before the panic: once the VMI is Failed its pod may
    # be gone before a later `kubectl logs` could read it.
    follower = Console([str(g.k.binary), "--kubeconfig", str(g.k.kubeconfig), "logs", "-f",
                        "-n", g.ns, pod, "-c", "guest-console-log"])  # fmt: skip
    try:
        console.until(TICK, 180)
        console.type("kvpy-panic")
        failed = _wait(lambda: g.phase("Failed"), 180, "VMI Failed after the panic",
                       lambda: g.vmi().get("status"))  # fmt: skip
        follower.until(b"KUBEVIRT-PY-PANICKING", 60)
    finally:
        console.close()
        follower.close()
    assert failed["status"]["reason"] == "GuestCrashed", failed["status"]
    assert g.event("GuestCrashed", 60)["type"] == "Warning"

    def pod_done() -> bool:
        found = pods(g.k, g.ns, "kubevirt.io=virt-launcher")
        return all(p["status"]["phase"] in ("Succeeded", "Failed") for p in found)  # type: ignore[index]

    _wait(pod_done, 180, "the launcher pod completing (guest-console-log ended too)",
          lambda: [p["status"] for p in pods(g.k, g.ns, "kubevirt.io=virt-launcher")])  # fmt: skip


def test_devices_console_log_watchdog_and_panic(
    real_cluster: Cluster, real_stack: Kubectl, real_namespace: str
) -> None:
    """One guest with clock, inputs, video, sound, watchdog, panic device and
    logSerialConsole: QEMU carries each device; `kubectl logs -c guest-console-log` shows
    the boot while `virtctl-py console` types into the guest; the watchdog (reset) expiring
    is an Event and the guest boots again, still Running; a kernel panic fails the VMI
    (reason GuestCrashed, with its Event) and the launcher pod then completes."""
    g = Guest(cluster=real_cluster, k=real_stack, ns=real_namespace)
    g.k("apply", "-n", g.ns, "-f", "-", stdin=json.dumps(_vmi()))
    pod = _boots_with_its_devices(g)
    _watchdog_resets(g, pod)
    _panic_fails_it(g, pod)


def test_kvm_only_feature_fails_on_an_emulating_node(
    real_stack: Kubectl, real_namespace: str
) -> None:
    """A VMI with a Hyper-V enlightenment is admitted, then fails on a TCG node with the
    HypervisorUnsupported reason naming the field and the node (never dropped)."""
    k, ns = real_stack, real_namespace
    spec = _vmi()
    spec["metadata"] = {"name": "hyperv"}
    spec["spec"]["domain"]["features"] = {"hyperv": {"relaxed": {}}}
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(spec))

    def status() -> dict[str, Any]:
        out = k("get", "vmi", "hyperv", "-n", ns, "-o", "json", check=False)
        found: dict[str, Any] = json.loads(out).get("status", {}) if out else {}
        return found

    failed = _wait(lambda: (s := status()).get("phase") == "Failed" and s, 300,
                   "hyperv VMI Failed", status)  # fmt: skip
    assert failed["reason"] == "HypervisorUnsupported", failed
    node = failed.get("nodeName") or ""
    texts = " ".join(str(c.get("message", "")) for c in failed.get("conditions", []))
    assert "spec.domain.features.hyperv" in texts and f"node {node}" in texts, failed
