"""Live migrations between real nodes that do not finish: cancelled while running, or
with a target whose QEMU dies mid-migration. Either way the guest stays on the source,
still running (the same VMI, its console ticking). While a migration runs, connections
to the target handler's proxy ports without a handler certificate (plain garbage, TLS
without a client certificate) are refused and logged, and the migration carries on.

The handlers' per-migration bandwidth is set to 1 MiB/s for this module (and put back
after it), so a migration runs long enough to be cancelled or broken while it is Running:
no test here depends on how long anything takes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.test_migration import _last_tick
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
    items = json.loads(k("get", "vmim", "-n", ns, "-o", "json"))["items"]
    return items[0] if items else {}


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


def test_a_target_dying_mid_migration_leaves_the_guest_on_the_source(
    slow_migrations: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """The target's QEMU is SIGKILLed while the migration runs: the VMIM ends Failed with a
    reason, the guest keeps running on the source (same VMI, console ticking)."""
    k, ns = slow_migrations, real_namespace
    vmi, tick = _running_demo(k, real_cluster, ns)
    vmim = _migrating(k, real_cluster, ns)
    pids = _wait(partial(_target_qemu, k, ns, vmim), 60, "the target's QEMU")
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    failed = _wait(
        lambda: (m := _vmim(k, ns)).get("status", {}).get("phase") == "Failed" and m,
        240, "the VMIM Failed", lambda: _vmim(k, ns).get("status"),
    )  # fmt: skip
    reason = failed["status"]["migrationState"].get("failureReason")
    assert reason, failed["status"]
    _stays_on_source(k, real_cluster, ns, vmi, tick)
