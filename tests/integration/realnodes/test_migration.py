"""Live migration between real nodes (kubelet + containerd, each node in its own network and
mount namespaces): nothing the two launchers use is shared, the streams cross the handlers'
migration proxy (mutual TLS between the handlers, TCP between the pods' IPs)."""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.errors import LocalKubeError
from localkube.realnode.multus import MIGRATION_NAD
from tests.integration.realnodes.test_story import (
    _described,
    _pod_uid,
    _reasons,
    _virtctl,
    _vmi,
    _wait,
    start_demo,
)

pytestmark = pytest.mark.cluster
TICKS = re.compile(r"KUBEVIRT-PY-TICK (\d+)")
HOST = "kubernetes.io/hostname"


def _private(cluster: Cluster, node: str, pod_uid: str) -> Path:
    return Path(
        cluster.config.nodes_dir, node, "kubelet", "pods", pod_uid, "volumes",
        "kubernetes.io~empty-dir", "private",
    )  # fmt: skip


def _last_tick(cluster: Cluster, node: str, pod_uid: str) -> int:
    log = _private(cluster, node, pod_uid) / "libvirt" / "log" / "kvpy" / "serial.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    ticks = [int(n) for n in TICKS.findall(text)]
    return ticks[-1] if ticks else -1


def _migrate_to(k: Kubectl, ns: str, name: str, selector: dict[str, str]) -> dict[str, Any]:
    """A VMIM of the demo VMI with this addedNodeSelector, once final."""
    vmim = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"vmiName": "demo", "addedNodeSelector": selector},
    }
    k("create", "-f", "-", stdin=json.dumps(vmim))

    def get() -> dict[str, Any]:
        got: dict[str, Any] = json.loads(k("get", "vmim", name, "-n", ns, "-o", "json"))
        return got

    final = ("Succeeded", "Failed")
    return _wait(  # type: ignore[no-any-return]
        lambda: (m := get()).get("status", {}).get("phase") in final and m,
        240, f"VMIM {name} final", lambda: get().get("status"),
    )  # fmt: skip


def _handler_pod(k: Kubectl, node: str) -> str:
    out = k("get", "pods", "-n", "kubevirt", "-l", "kubevirt.io=virt-handler",
            "--field-selector", f"spec.nodeName={node}", "-o", "name")  # fmt: skip
    (pod,) = out.split()
    return pod


def _tx_bytes(k: Kubectl, pod: str) -> tuple[int, int]:
    """(migration0, eth0) bytes sent by the handler pod: the interfaces' own counters."""
    code = "print(*(open(f'/sys/class/net/{i}/statistics/tx_bytes').read() for i in ('migration0', 'eth0')))"
    mig, eth = k(
        "exec", "-n", "kubevirt", pod, "-c", "virt-handler", "--", "python", "-c", code
    ).split()
    return int(mig), int(eth)


def _data_processed(k: Kubectl, pod: str) -> int:
    """The bytes QEMU sent in the last migration from this handler's node (its log)."""
    logs = k("logs", "-n", "kubevirt", pod, "-c", "virt-handler")
    finished = [
        json.loads(line) for line in logs.splitlines() if "migration_source_finished" in line
    ]
    return int(finished[-1]["data_processed"])


def test_demo_vm_live_migrates_between_real_nodes(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """`virtctl-py migrate demo --wait` moves the running demo VM to the other real node: the
    VMIM Succeeded, migrationState names the target handler's address and its four proxy
    ports, the guest's console keeps ticking on the target past where it was, and the
    target's per-migration proxy dir is gone once the migration ended. The streams went over
    the migration network: the target advertised its migration0 address, and the source
    handler's migration0 sent at least what QEMU sent while its eth0 sent under a quarter
    of that (the interfaces' own counters). Then
    spec.addedNodeSelector: one no node matches ends Failed at once, its failureReason naming
    the field, the VM left where it is; one naming the first node's hostname label Succeeds
    and the VMI runs on that node again."""
    k, ns = real_stack, real_namespace
    vmi = start_demo(k, ns)
    source, source_pod = _pod_uid(vmi)
    _wait(lambda: _last_tick(real_cluster, source, source_pod) > 2, 180, "guest ticks")
    before = _last_tick(real_cluster, source, source_pod)
    handler = _handler_pod(k, source)
    sent_before = _tx_bytes(k, handler)

    done = _virtctl(real_cluster.kubeconfig, ns, "migrate", "demo", "--wait", "--timeout", "240")
    if done.returncode != 0:
        logs = k("logs", "-n", "kubevirt", "-l", "kubevirt.io=virt-handler", "--tail", "60",
                 "--prefix", check=False)  # fmt: skip
        seen = _vmi(k, ns).get("status", {}).get("migrationState")
        raise AssertionError(f"{done.stderr}\nmigrationState: {seen}\nhandlers:\n{logs}")
    (vmim,) = json.loads(k("get", "vmim", "-n", ns, "-o", "json"))["items"]
    assert vmim["status"]["phase"] == "Succeeded", vmim["status"]

    moved = _wait(
        lambda: (v := _vmi(k, ns)).get("status", {}).get("nodeName") not in (None, source) and v,
        120,
        "the VMI on the other node",
        lambda: _vmi(k, ns).get("status"),
    )
    target, target_pod = _pod_uid(moved)
    assert moved["status"]["phase"] == "Running"
    state: dict[str, Any] = moved["status"]["migrationState"]
    assert state["completed"] is True and state["targetNode"] == target
    ports = state["targetDirectMigrationNodePorts"]
    assert sorted(ports.values()) == [0, 49152, 49153, 49154], state
    assert not state["targetNodeAddress"].startswith("/"), state  # a network address
    # The migration network (the test bed's KubeVirt CR names it): the target handler
    # advertised its migration0 address, and the bytes left the source by migration0.
    migration_net = ipaddress.ip_network(real_cluster.fleet().plan.migration_cidr)
    assert ipaddress.ip_address(state["targetNodeAddress"]) in migration_net, state
    sent_after, qemu_sent = _tx_bytes(k, handler), _data_processed(k, handler)
    mig_sent, eth_sent = (a - b for a, b in zip(sent_after, sent_before, strict=True))
    assert qemu_sent > 1024 * 1024 and mig_sent >= qemu_sent, (mig_sent, eth_sent, qemu_sent)
    assert eth_sent < qemu_sent // 4, (mig_sent, eth_sent, qemu_sent)
    print(f"migration network: migration0 sent {mig_sent}, eth0 {eth_sent}, QEMU {qemu_sent}")
    _wait(
        lambda: _last_tick(real_cluster, target, target_pod) > before,
        120,
        "ticks continue on the target's console",
        lambda: _last_tick(real_cluster, target, target_pod),
    )
    _described(k, ns, "vmi", {"Migrating", "Migrated"})
    vmim_uid = vmim["metadata"]["uid"]
    _wait(lambda: {"SuccessfulCreate", "SuccessfulMigration"} <= _reasons(k, ns, vmim_uid),
          60, "the VMIM's events", lambda: _reasons(k, ns, vmim_uid))  # fmt: skip
    mig = _private(real_cluster, target, target_pod) / "mig" / state["migrationUid"][:8]
    _wait(lambda: not mig.exists(), 60, f"{mig} removed by the target handler")

    # spec.addedNodeSelector: matching no node, the VMIM fails naming the field and the VMI
    # stays; naming the first node's hostname label, the VM moves back there.
    nowhere = _migrate_to(k, ns, "to-nowhere", {HOST: "no-such-node"})
    assert nowhere["status"]["phase"] == "Failed", nowhere["status"]
    why = nowhere["status"]["migrationState"]["failureReason"]
    assert why.startswith("spec.addedNodeSelector {kubernetes.io/hostname=no-such-node}"), why
    assert _vmi(k, ns)["status"]["nodeName"] == target
    label = json.loads(k("get", "node", source, "-o", "json"))["metadata"]["labels"][HOST]
    back = _migrate_to(k, ns, "back-to-source", {HOST: label})
    assert back["status"]["phase"] == "Succeeded", back["status"]
    assert back["status"]["migrationState"]["targetNode"] == source
    _wait(lambda: _vmi(k, ns).get("status", {}).get("nodeName") == source, 60, "VMI on source")
    _check_migration_network_refusals(k)


def _kv_network(k: Kubectl, network: str, *, check: bool = True) -> str:
    patch = {"spec": {"configuration": {"migrations": {"network": network}}}}
    return k("patch", "kv", "kubevirt", "-n", "kubevirt", "--type=merge", "-p", json.dumps(patch),
             check=check)  # fmt: skip


def _degraded(k: Kubectl) -> dict[str, Any]:
    kv = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))
    return next(c for c in kv["status"]["conditions"] if c["type"] == "Degraded")


def _check_migration_network_refusals(k: Kubectl) -> None:
    """A namespaced network is refused at admission naming the field; a NAD that does not
    exist makes the KubeVirt CR Degraded naming it, the handlers untouched; back to the
    test bed's network, Degraded clears."""
    ds = "daemonset/virt-handler"
    generation = k("get", ds, "-n", "kubevirt", "-o", "jsonpath={.metadata.generation}")
    with pytest.raises(LocalKubeError, match=r"spec\.configuration\.migrations\.network"):
        _kv_network(k, "other-ns/net")
    _kv_network(k, "no-such-net")
    try:
        cond = _wait(
            lambda: (c := _degraded(k))["reason"] == "MigrationNetworkNotFound" and c,
            60, "Degraded for the missing NAD", lambda: _degraded(k),
        )  # fmt: skip
        assert "spec.configuration.migrations.network" in cond["message"], cond
        assert "kubevirt/no-such-net not found" in cond["message"], cond
    finally:
        _kv_network(k, MIGRATION_NAD)
    _wait(lambda: _degraded(k)["status"] == "False", 60, "Degraded cleared", lambda: _degraded(k))
    assert k("get", ds, "-n", "kubevirt", "-o", "jsonpath={.metadata.generation}") == generation
