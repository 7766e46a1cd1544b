"""Live migrations between real nodes that do not finish: cancelled while running, with
a target whose QEMU is frozen mid-migration (aborted after the KubeVirt CR's
progressTimeout without progress), or with a target whose QEMU dies mid-migration. Either
way the guest stays on the source, still running (the same VMI, its console ticking). While a migration runs, connections
to the target handler's proxy ports without a handler certificate (plain garbage, TLS
without a client certificate) are refused and logged, and the migration carries on.

The handlers' per-migration bandwidth is set to 1 MiB/s for this module (and put back
after it), so a migration runs long enough to be cancelled or broken while it is Running:
no test here depends on how long anything takes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import ssl
import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_migration import _last_tick
from tests.integration.realnodes.test_shared_storage import _libvirt
from tests.integration.realnodes.test_story import (
    REPO,
    _pod_uid,
    _qemu_pids,
    _virtctl,
    _vmi,
    _wait,
)

pytestmark = pytest.mark.cluster


def _rollout(k: Kubectl) -> None:
    k("rollout", "status", "-n", "kubevirt", "ds/virt-handler", "--timeout=240s")


@contextlib.contextmanager
def migrations_slowed(k: Kubectl) -> Iterator[Kubectl]:
    """The KubeVirt CR limits each migration to 1 MiB/s (read live by the handlers, no
    rollout); its migrations configuration as it was afterwards."""
    kv = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))
    before = kv["spec"].get("configuration", {}).get("migrations")
    slow = {"spec": {"configuration": {"migrations": {"bandwidthPerMigration": "1Mi"}}}}
    k("patch", "kv", "kubevirt", "-n", "kubevirt", "--type=merge", "-p", json.dumps(slow))
    try:
        yield k
    finally:
        op = {"op": "replace", "path": "/spec/configuration/migrations", "value": before}
        if before is None:
            op = {"op": "remove", "path": "/spec/configuration/migrations"}
        k("patch", "kv", "kubevirt", "-n", "kubevirt", "--type=json", "-p", json.dumps([op]))


@pytest.fixture(scope="module")
def slow_migrations(real_stack: Kubectl) -> Iterator[Kubectl]:
    """Migrations limited to 1 MiB/s for the module's tests; unlimited again afterwards."""
    with migrations_slowed(real_stack) as k:
        yield k


def _ticks_past(cluster: Cluster, node: str, pod: str, tick: int) -> bool:
    return _last_tick(cluster, node, pod) > tick


def _running_demo(k: Kubectl, cluster: Cluster, ns: str) -> tuple[dict[str, Any], int]:
    """The demo VM Running, its console ticking: (its VMI, the last tick seen)."""
    vm = yaml.safe_load((REPO / "examples" / "vm-demo.yaml").read_text())
    vm["metadata"]["namespace"] = ns
    k("apply", "-f", "-", stdin=json.dumps(vm))
    vmi: dict[str, Any] = _wait(
        lambda: (v := _vmi(k, ns)).get("status", {}).get("phase") == "Running" and v,
        300, "demo VMI Running", lambda: _vmi(k, ns).get("status"),
    )  # fmt: skip
    node, pod = _pod_uid(vmi)
    _wait(partial(_ticks_past, cluster, node, pod, 2), 180, "guest ticks")
    return vmi, _last_tick(cluster, node, pod)


def _vmim(k: Kubectl, ns: str) -> dict[str, Any]:
    """The namespace's newest VMIM ({} when none)."""
    items = json.loads(k("get", "vmim", "-n", ns, "-o", "json"))["items"]
    newest: dict[str, Any] = max(
        items, key=lambda m: m["metadata"]["creationTimestamp"], default={}
    )
    return newest


def _migrating(k: Kubectl, cluster: Cluster, ns: str) -> dict[str, Any]:
    """Start a migration of demo and wait until it is Running: the VMIM."""
    started = _virtctl(cluster.kubeconfig, ns, "migrate", "demo")
    assert started.returncode == 0, started.stderr
    vmim: dict[str, Any] = _wait(
        lambda: (m := _vmim(k, ns)).get("status", {}).get("phase") == "Running" and m,
        240, "the VMIM Running", lambda: _vmim(k, ns).get("status"),
    )  # fmt: skip
    return vmim


def _stays_on_source(
    k: Kubectl, cluster: Cluster, ns: str, vmi: dict[str, Any], tick: int
) -> dict[str, Any]:
    """The same VMI, Running on its source node, its console ticking past `tick`."""
    source = vmi["status"]["nodeName"]
    now = _vmi(k, ns)
    assert now["metadata"]["uid"] == vmi["metadata"]["uid"]
    assert (now["status"]["phase"], now["status"]["nodeName"]) == ("Running", source)
    node, pod = _pod_uid(now)
    _wait(partial(_ticks_past, cluster, node, pod, tick), 120, "ticks continue on the source")
    return now


def _handler_logs(k: Kubectl, node: str) -> str:
    out = k("get", "pods", "-n", "kubevirt", "-l", "kubevirt.io=virt-handler", "-o", "json")
    (name,) = [
        p["metadata"]["name"] for p in json.loads(out)["items"] if p["spec"].get("nodeName") == node
    ]
    return k("logs", "-n", "kubevirt", name, "--tail=-1", check=False)


def _poke(address: str, port: int, *, tls: bool) -> bytes:
    """Garbage over plain TCP, or a TLS handshake without a client certificate; what the
    port answered before it closed (b"" when refused)."""
    got = b""
    with socket.create_connection((address, port), timeout=15) as raw:
        try:
            if tls:
                ctx = ssl.create_default_context()
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
                with ctx.wrap_socket(raw) as conn:
                    conn.sendall(b"x" * 4096)
                    got = conn.recv(4096)
            else:
                raw.sendall(b"GET / HTTP/1.0\r\n\r\n" * 100)
                got = raw.recv(4096)
        except (OSError, ssl.SSLError):
            pass
    return got


def test_cancel_leaves_the_guest_on_the_source_and_bad_proxy_input_is_refused(
    slow_migrations: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """While a migration runs, garbage and certificate-less TLS on each of the target
    handler's proxy ports get nothing back and are logged as refused, and the migration is
    still Running; `virtctl-py migrate-cancel` then cancels it: the VMIM goes away, the
    VMI's migrationState says the abort Succeeded, the target pod is gone, and the guest
    keeps running on the source."""
    k, ns = slow_migrations, real_namespace
    vmi, tick = _running_demo(k, real_cluster, ns)
    vmim = _migrating(k, real_cluster, ns)
    state = _vmi(k, ns)["status"]["migrationState"]
    address, target = state["targetNodeAddress"], state["targetNode"]
    for port in state["targetDirectMigrationNodePorts"]:
        assert _poke(address, int(port), tls=False) == b"", port
        assert _poke(address, int(port), tls=True) == b"", port
    refused = _wait(
        lambda: (n := _handler_logs(k, target).count("migration_proxy_refused")) >= 8 and n,
        60, "8 refusals in the target handler's log",
    )  # fmt: skip
    assert refused >= 8
    assert _vmim(k, ns)["status"]["phase"] == "Running", "the migration carries on"

    cancelled = _virtctl(real_cluster.kubeconfig, ns, "migrate-cancel", "demo")
    assert cancelled.returncode == 0, cancelled.stderr
    _wait(lambda: not _vmim(k, ns), 180, "the VMIM gone", lambda: _vmim(k, ns).get("status"))
    after = _stays_on_source(k, real_cluster, ns, vmi, tick)
    ended = after["status"]["migrationState"]
    assert ended["migrationUid"] == vmim["metadata"]["uid"]
    assert ended.get("abortStatus") == "Succeeded" and ended.get("failed") is True, ended
    target_label = f"kubevirt.io/migrationJobUID={vmim['metadata']['uid']}"
    _wait(lambda: not k("get", "pods", "-n", ns, "-l", target_label, "-o", "name").strip(),
          120, "the target pod gone")  # fmt: skip


def _target_qemu(k: Kubectl, ns: str, vmim: dict[str, Any]) -> list[int]:
    """The target launcher's QEMU: the guest's QEMU in the target pod's cgroup."""
    label = f"kubevirt.io/migrationJobUID={vmim['metadata']['uid']}"
    (pod,) = json.loads(k("get", "pods", "-n", ns, "-l", label, "-o", "json"))["items"]
    uid = pod["metadata"]["uid"]
    found = []
    for pid in _qemu_pids(f"{ns}_demo"):
        try:
            cgroups = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        if f"pod{uid}" in cgroups or f"pod{uid.replace('-', '_')}" in cgroups:
            found.append(pid)
    return found


# The KubeVirt CR's progressTimeout while the frozen target's migration starts: long enough
# for the target's QEMU to start (progress is counted from the job's start, as KubeVirt does).
STALL_SECONDS = 8


def _progress_timeout(k: Kubectl, seconds: int | None) -> None:
    """Set (None: unset) the KubeVirt CR's migrations.progressTimeout."""
    patch = {"spec": {"configuration": {"migrations": {"progressTimeout": seconds}}}}
    k("patch", "kv", "kubevirt", "-n", "kubevirt", "--type=merge", "-p", json.dumps(patch))


def _memory_sent(cluster: Cluster, vmi: dict[str, Any]) -> bool:
    """The source's migration job has sent memory: the target's QEMU is set up and reads."""
    domain = f"{vmi['metadata']['namespace']}_{vmi['metadata']['name']}"
    with _libvirt(cluster, vmi) as uri:
        done = subprocess.run(["virsh", "-c", uri, "domjobinfo", domain],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    sent = re.search(r"^Memory processed:\s+([\d.]+)", done.stdout, re.MULTILINE)
    return sent is not None and float(sent.group(1)) > 0


def _launcher_log(k: Kubectl, ns: str, pod_uid: str) -> str:
    items = json.loads(k("get", "pods", "-n", ns, "-o", "json"))["items"]
    (name,) = [p["metadata"]["name"] for p in items if p["metadata"]["uid"] == pod_uid]
    return k("logs", "-n", ns, name, "-c", "compute", check=False)


def _failed(k: Kubectl, ns: str) -> dict[str, Any]:
    failed: dict[str, Any] = _wait(
        lambda: (m := _vmim(k, ns)).get("status", {}).get("phase") == "Failed" and m,
        240, "the VMIM Failed", lambda: _vmim(k, ns).get("status"),
    )  # fmt: skip
    return failed


def _frozen_target_stalls(k: Kubectl, cluster: Cluster, ns: str, vmi: dict[str, Any]) -> str:
    """A migration started under progressTimeout=STALL_SECONDS whose target's QEMU is
    SIGSTOPped once memory flows: the source launcher aborts it as stalled (the QEMU is
    thawed then, for its libvirt to wind the migration up); the VMIM's failureReason."""
    _progress_timeout(k, STALL_SECONDS)
    try:
        vmim = _migrating(k, cluster, ns)  # Running: the handler's migrate call was made
    finally:
        _progress_timeout(k, None)
    _wait(partial(_memory_sent, cluster, vmi), 120, "memory on its way to the target")
    pids = _wait(partial(_target_qemu, k, ns, vmim), 60, "the target's QEMU")
    _, source_pod = _pod_uid(vmi)
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        _wait(lambda: "migration_stalled" in _launcher_log(k, ns, source_pod), 180,
              "the source launcher aborting the stalled migration")  # fmt: skip
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    state = _failed(k, ns)["status"]["migrationState"]
    assert state.get("abortStatus") == "Succeeded", state  # KubeVirt's, for its own abort
    reason: str = state.get("failureReason", "")
    return reason


def test_a_target_frozen_or_dying_mid_migration_leaves_the_guest_on_the_source(
    slow_migrations: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """The target's QEMU is frozen (SIGSTOP) while the migration runs, under a KubeVirt CR
    progressTimeout of STALL_SECONDS: the source launcher aborts the migration after that
    long without progress and the VMIM ends Failed with KubeVirt's reason ("Live migration
    stuck for N seconds and has been aborted", N at least STALL_SECONDS and well below the
    default 150) and abortStatus Succeeded, as KubeVirt's. Then a second migration's target QEMU is SIGKILLed: that VMIM ends Failed
    with a reason too. Each time the guest keeps running on the source (same VMI, console
    ticking)."""
    k, ns = slow_migrations, real_namespace
    vmi, tick = _running_demo(k, real_cluster, ns)
    reason = _frozen_target_stalls(k, real_cluster, ns, vmi)
    stuck = re.fullmatch(r"Live migration stuck for (\d+) seconds and has been aborted", reason)
    assert stuck is not None and STALL_SECONDS <= int(stuck.group(1)) < 150, reason
    vmi = _stays_on_source(k, real_cluster, ns, vmi, tick)
    tick = _last_tick(real_cluster, *_pod_uid(vmi))

    vmim = _migrating(k, real_cluster, ns)
    pids = _wait(partial(_target_qemu, k, ns, vmim), 60, "the target's QEMU")
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    failed = _failed(k, ns)
    assert failed["metadata"]["uid"] == vmim["metadata"]["uid"]
    assert failed["status"]["migrationState"].get("failureReason"), failed["status"]
    _stays_on_source(k, real_cluster, ns, vmi, tick)
