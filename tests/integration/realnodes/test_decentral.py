"""Decentralized live migration (KubeVirt 1.7's `sendTo` / `receive`, docs/migration.md):
a running VM in namespace A moves into a WaitAsReceiver VM of namespace B, each half
driven by its own VMIM, the streams through the handlers' migration proxy as for any
migration; then a running VM moves to a second cluster (the session's peer_stack) through
the two controllers' synchronization endpoints."""

from __future__ import annotations

import copy
import json
import subprocess
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from tests.integration.realnodes.fixtures import PeerStack
from tests.integration.realnodes.test_live_change import _patch_kv, kv_restored
from tests.integration.realnodes.test_shared_storage import (
    LIVE_SECTOR,
    _agent_connected,
    _guest_sh,
    _libvirt,
    _read,
    _template,
    _write,
)
from tests.integration.realnodes.test_storage import _apply, _get, _running
from tests.integration.realnodes.test_story import _pod_uid, _virtctl, _wait
from tests.integration.realnodes.test_volume_migration import _claim, _volume_claim

pytestmark = pytest.mark.cluster
__all__ = ["kv_restored"]  # the fixture, used by name
SYNC = "virt-synchronization-controller.kubevirt.svc:9185"
UNREACHABLE = "127.0.0.1:1"
MARKER = "/run/kvpy-decentral"
# The guest's own view: uptime in seconds, the marker it wrote, its SMBIOS system UUID.
PROBE = (
    "[ -d /sys/class/dmi ] || mount -t sysfs sys /sys; "
    f"cut -d' ' -f1 /proc/uptime; cat {MARKER}; cat /sys/class/dmi/id/product_uuid"
)


def _vm(name: str, *, strategy: str, claim: str) -> dict[str, Any]:
    """The tiny guest on its containerDisk (copied by the migration) with `claim` as vdb
    (volume `data`: the source's copied into the receiver's)."""
    template = copy.deepcopy(_template(claim))
    spec = template["spec"]
    kernel = spec["domain"]["firmware"]["kernelBoot"]
    kernel["kernelArgs"] = "console=ttyS0 panic=-1 quiet"
    template["metadata"]["labels"] = {"kubevirt.io/vm": name}
    meta: dict[str, Any] = {"name": name}
    if strategy == "WaitAsReceiver":
        meta["annotations"] = {"kubevirt.io/restore-run-strategy": "Always"}
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": meta,
            "spec": {"runStrategy": strategy, "template": template}}  # fmt: skip


def _vmim(name: str, vmi: str, half: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
            "metadata": {"name": name}, "spec": {"vmiName": vmi, **half}}  # fmt: skip


def _probe(cluster: Cluster, vmi: dict[str, Any]) -> tuple[float, str, str]:
    uptime, marker, smbios = _guest_sh(cluster, vmi, PROBE).split("\n")[:3]
    return float(uptime), marker, smbios.lower()


def _phase(k: Kubectl, ns: str, kind: str, name: str) -> str:
    return str(_get(k, ns, kind, name).get("status", {}).get("phase", ""))


def test_a_running_vm_moves_to_another_namespace(
    kv_restored: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """Gate DecentralizedLiveMigration on; VM `src` runs in namespace A; VM `dst` in B
    waits (WaitAsReceiver: its VMI WaitingForSync with no launcher pod, the VM printing
    WaitingForReceiver; virtctl start refused, stop changing nothing; a lone receiving
    VMIM deleted fails, dst waiting on, told, as KubeVirt's). A sending VMIM in
    A (Synchronizing until its receiver is there) and a receiving VMIM in B with the same
    migrationID move the guest: both VMIMs Succeeded through KubeVirt's phases, the receiving VMI Running in B on its node, the guest the same (its uptime
    went on, the marker it wrote in memory is there, its SMBIOS UUID is the source's),
    what it wrote on its ReadWriteOnce claim in A read back from dst's claim of another
    class in B (a storage migration into the receiving VM's own disk), the
    source VMI Succeeded and its launcher pod no longer running, VM dst took its
    restore-run-strategy (Always) and VM src is Halted (its VMI kept, not restarted).
    First a sendTo naming another cluster where nothing answers fails naming its
    connectURL (src untouched); the KubeVirt CR and the receiving VMIM list the leader's
    synchronization address."""
    k, a = kv_restored, real_namespace
    b = f"{a}-b"
    gates = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))["spec"]
    gates = gates["configuration"].get("developerConfiguration", {}).get("featureGates", [])
    _patch_kv(
        k, {"developerConfiguration": {"featureGates": [*gates, "DecentralizedLiveMigration"]}}
    )
    k("create", "namespace", b)
    try:
        _move(k, real_cluster, a, b)
    finally:
        k("delete", "vm", "--all", "-n", b, "--wait=true", "--timeout=120s", check=False)
        k("delete", "namespace", b, "--wait=false", check=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Ends:
    """One side of a move: where its VM and its own claim live."""

    kubectl: Kubectl
    ns: str
    vm: str
    claim: str
    storage_class: str


def _marked_pair(
    cluster: Cluster, src: _Ends, dst: _Ends
) -> tuple[dict[str, Any], str, str, float, str]:
    """The running source VM (64Mi claim) and the waiting receiver (1Gi claim); a marker
    written in the source guest's memory and on its disk. Returns the source VMI, both
    markers, the guest's uptime and its SMBIOS UUID before the move."""
    _apply(src.kubectl, src.ns, _claim(src.claim, "64Mi", storage_class=src.storage_class))
    _apply(dst.kubectl, dst.ns, _claim(dst.claim, "1Gi", storage_class=dst.storage_class))
    _apply(src.kubectl, src.ns, _vm(src.vm, strategy="Always", claim=src.claim))
    _apply(dst.kubectl, dst.ns, _vm(dst.vm, strategy="WaitAsReceiver", claim=dst.claim))
    source = _running(src.kubectl, src.ns, src.vm)
    _agent_connected(src.kubectl, src.ns, src.vm)
    mark = f"KVPY-DECENTRAL {uuid.uuid4().hex[:12]}"
    _guest_sh(cluster, source, f"echo '{mark}' > {MARKER}")
    on_disk = f"KVPY-DECENTRAL-DISK {uuid.uuid4().hex[:12]}"
    _write(cluster, source, LIVE_SECTOR, on_disk)
    before, _, smbios = _probe(cluster, source)
    return source, mark, on_disk, before, smbios


def _move(k: Kubectl, cluster: Cluster, a: str, b: str) -> None:
    # Each VM's own claim: a node-local ReadWriteOnce one in A (not shared: copied), a
    # claim of another class in B (its disk.img made by the target, the copy's end).
    src = _Ends(kubectl=k, ns=a, vm="src", claim="dec-src", storage_class="local-storage")
    dst = _Ends(kubectl=k, ns=b, vm="dst", claim="dec-dst", storage_class="csi-local")
    source, mark, on_disk, before, smbios = _marked_pair(cluster, src, dst)
    uuid_before = _domain_uuid(cluster, source)
    assert smbios == uuid_before, (smbios, uuid_before)
    waiting = _wait(lambda: _phase(k, b, "vmi", "dst") == "WaitingForSync" and _get(k, b, "vmi", "dst"),
                    60, "dst WaitingForSync", lambda: _get(k, b, "vmi", "dst").get("status"))  # fmt: skip
    assert not waiting["status"].get("activePods"), waiting["status"]
    _wait(lambda: _get(k, b, "vm", "dst").get("status", {}).get("printableStatus")
          == "WaitingForReceiver", 60, "dst WaitingForReceiver",
          lambda: _get(k, b, "vm", "dst").get("status"))  # fmt: skip
    # virtctl on a WaitAsReceiver VM, as KubeVirt's virt-api answers: start refused while
    # its VMI waits, stop accepted without touching the runStrategy.
    started = _virtctl(k.kubeconfig, b, "start", "dst")
    assert started.returncode != 0, started
    assert "VM is already running" in started.stderr + started.stdout, started
    assert _virtctl(k.kubeconfig, b, "stop", "dst").returncode == 0
    assert _get(k, b, "vm", "dst")["spec"]["runStrategy"] == "WaitAsReceiver"
    # Another cluster that does not answer (nothing listens there in the leader's pod):
    # admitted, Synchronizing, then Failed naming its connectURL; src untouched.
    lost = {"migrationID": f"m-{uuid.uuid4().hex[:8]}", "connectURL": UNREACHABLE}
    _apply(k, a, _vmim("elsewhere", "src", {"sendTo": lost}))
    _a_lone_receiver_fails(k, b)
    address = _sync_address(k)
    _an_unreachable_cluster_fails(k, a)

    mid = f"mig-{uuid.uuid4().hex[:8]}"
    # The sender first: it waits (KubeVirt's Synchronizing) for its receiver, whose
    # target pod is then kept off the source's node.
    _apply(k, a, _vmim("out", "src", {"sendTo": {"migrationID": mid, "connectURL": SYNC}}))
    _wait(lambda: _phase(k, a, "vmim", "out") == "Synchronizing", 60, "out Synchronizing",
          lambda: _get(k, a, "vmim", "out").get("status"))  # fmt: skip
    _apply(k, b, _vmim("in", "dst", {"receive": {"migrationID": mid}}))

    def done() -> bool:
        return {_phase(k, a, "vmim", "out"), _phase(k, b, "vmim", "in")} <= {"Succeeded", "Failed"}

    _wait(done, 240, "both VMIMs final", lambda: (_get(k, a, "vmim", "out").get("status"),
                                                  _get(k, b, "vmim", "in").get("status")))  # fmt: skip
    sent, received = _get(k, a, "vmim", "out")["status"], _get(k, b, "vmim", "in")["status"]
    assert sent["phase"] == "Succeeded", sent.get("migrationState", {}).get("failureReason")
    assert received["phase"] == "Succeeded", received
    assert received["synchronizationAddresses"] == [address], received
    handoff = ["Scheduling", "Scheduled", "PreparingTarget", "TargetReady", "Running"]
    assert _phases(sent) == ["Synchronizing", "Pending", *handoff, "Succeeded"], sent
    assert _phases(received) == ["WaitingForSync", "Pending", *handoff, "Succeeded"], received
    assert not [c for c in received.get("conditions", [])
                if c["type"] == "decentralizedMigrationBlocked"], received  # fmt: skip
    moved = _running(k, b, "dst")
    assert not [c for c in moved["status"].get("conditions", [])
                if c["type"] == "DecentralizedLiveMigrationFailure"], moved  # fmt: skip
    node, _ = _pod_uid(moved)
    assert node == moved["metadata"]["labels"]["kubevirt.io/nodeName"]
    _agent_connected(k, b, "dst")  # the target's agent channel reconnects after the move
    after, marker, smbios_after = _probe(cluster, moved)
    assert marker == mark and smbios_after == smbios and after > before, (after, before)
    assert _domain_uuid(cluster, moved) == uuid_before  # libvirt's domain: the same guest
    assert _read(cluster, moved, LIVE_SECTOR) == on_disk  # copied into dst's own claim
    assert _volume_claim(moved) == "dec-dst"
    _wait(lambda: _phase(k, a, "vmi", "src") == "Succeeded", 60, "src VMI Succeeded",
          lambda: _get(k, a, "vmi", "src").get("status"))  # fmt: skip
    _wait(lambda: not _live_launchers(k, a), 120, "src's launcher pod ended",
          lambda: _live_launchers(k, a))  # fmt: skip
    _wait(lambda: _get(k, b, "vm", "dst")["spec"]["runStrategy"] == "Always", 60,
          "dst runStrategy restored", lambda: _get(k, b, "vm", "dst")["spec"])  # fmt: skip
    _wait(lambda: _get(k, a, "vm", "src")["spec"]["runStrategy"] == "Halted", 60,
          "src Halted, not started again", lambda: _get(k, a, "vm", "src")["spec"])  # fmt: skip
    assert _phase(k, a, "vmi", "src") == "Succeeded"  # kept, not replaced


def _sync_address(k: Kubectl) -> str:
    """The KubeVirt CR lists the leader's synchronization address: its pod IP, port 9185."""
    kv = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))
    (address,) = kv["status"]["synchronizationAddresses"]
    leader = json.loads(k("get", "lease", "virt-controller-py", "-n", "kubevirt", "-o", "json"))
    pod = json.loads(k("get", "pod", leader["spec"]["holderIdentity"], "-n", "kubevirt",
                       "-o", "json"))  # fmt: skip
    assert address == f"{pod['status']['podIP']}:9185", (address, pod["status"])
    return str(address)


def _an_unreachable_cluster_fails(k: Kubectl, a: str) -> None:
    """The sending VMIM to a connectURL where nothing answers fails (after its tries)
    naming it; VMI src runs on, its migrationState never written."""
    _wait(lambda: _phase(k, a, "vmim", "elsewhere") == "Failed", 90, "elsewhere Failed",
          lambda: _get(k, a, "vmim", "elsewhere").get("status"))  # fmt: skip
    failed = _get(k, a, "vmim", "elsewhere")["status"]["migrationState"]["failureReason"]
    assert failed.startswith(f"connectURL {UNREACHABLE}: synchronization failed 3 times"), failed
    src = _get(k, a, "vmi", "src")["status"]
    assert src["phase"] == "Running" and "migrationState" not in src, src
    k("delete", "vmim", "elsewhere", "-n", a, "--wait=true", "--timeout=60s")


def _sync_logs(k: Kubectl) -> list[str]:
    """The controllers' log lines about decentralized migration (shown on a timeout)."""
    out = k("logs", "-n", "kubevirt", "-l", "kubevirt.io=virt-controller", "--prefix",
            "--tail=2000", check=False)  # fmt: skip
    words = ("decentral", "sync_", "sync-server", "leading", "migrationID")
    return [line[-400:] for line in out.splitlines() if any(w in line for w in words)][-40:]


def _blocked(k: Kubectl, ns: str) -> list[dict[str, Any]]:
    """VMI dst's DecentralizedLiveMigrationFailure conditions."""
    conditions = _get(k, ns, "vmi", "dst").get("status", {}).get("conditions", [])
    return [c for c in conditions if c["type"] == "DecentralizedLiveMigrationFailure"]


def _a_lone_receiver_fails(k: Kubectl, b: str) -> None:
    """A receiving VMIM with no sender waits (WaitingForSync), VMI dst carrying KubeVirt's
    DecentralizedLiveMigrationFailure; deleted, it fails and VMI dst keeps waiting, as
    KubeVirt's: its migrationState failed and completed, the condition gone (the next
    pair of VMIMs then moves the guest into it)."""
    _apply(k, b, _vmim("lone", "dst", {"receive": {"migrationID": f"lone-{uuid.uuid4().hex[:8]}"}}))
    (cond,) = _wait(lambda: _blocked(k, b), 60, "dst blocked",
                    lambda: _get(k, b, "vmi", "dst").get("status"))  # fmt: skip
    assert cond["status"] == "True" and cond["reason"] == "DecentralizedNotLiveMigratable"
    assert cond["message"] == "waiting for incoming synchronization, unable to proceed"
    assert _phase(k, b, "vmim", "lone") == "WaitingForSync"
    k("delete", "vmim", "lone", "-n", b, "--wait=true", "--timeout=60s")

    def told() -> dict[str, Any] | None:
        status: dict[str, Any] = _get(k, b, "vmi", "dst").get("status", {})
        return status if status.get("migrationState", {}).get("failed") else None

    status = _wait(told, 60, "dst told", lambda: _get(k, b, "vmi", "dst").get("status"))
    assert status["phase"] == "WaitingForSync", status
    assert status["migrationState"]["completed"] and not _blocked(k, b), status


def _phases(status: dict[str, Any]) -> list[str]:
    """The VMIM's phases in the order it went through them."""
    return [t["phase"] for t in status.get("phaseTransitionTimestamps", [])]


def _domain_uuid(cluster: Cluster, vmi: dict[str, Any]) -> str:
    """The UUID of the VMI's domain in its launcher's libvirt."""
    domain = f"{vmi['metadata']['namespace']}_{vmi['metadata']['name']}"
    with _libvirt(cluster, vmi) as uri:
        argv = ["virsh", "-c", uri, "domuuid", domain]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().lower()


def _live_launchers(k: Kubectl, ns: str) -> list[str]:
    pods = json.loads(k("get", "pods", "-n", ns, "-l", "kubevirt.io=virt-launcher", "-o", "json"))
    return [p["metadata"]["name"] for p in pods["items"]
            if p["status"].get("phase") not in ("Succeeded", "Failed")]  # fmt: skip


def test_a_running_vm_moves_to_another_cluster(
    peer_stack: PeerStack, real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """VM `far` runs in cluster A on a local-storage claim, the guest having written a
    marker in memory and on its disk; VM `far` of cluster B (WaitAsReceiver, its own
    claim) waits. A receiving VMIM in B lists B's leader synchronization address
    (status.synchronizationAddresses); a sending VMIM in A naming it as connectURL moves
    the guest over the two clusters' synchronization endpoints (mutual TLS with the shared
    CA) and migration proxies (A's handler dialling B's handler's pod address; A has a
    migration network, B none): both VMIMs Succeeded, the guest running in B the same
    (uptime went on, the marker in memory, its SMBIOS UUID), what it wrote on A's claim
    read back from B's; only then is the source, Succeeded and its VM Halted, torn down."""
    k, far = real_stack, peer_stack.kubectl
    a = real_namespace
    b = f"{a}-far"
    far("create", "namespace", b)
    try:
        _move_far(k, real_cluster, a, peer=peer_stack, b=b)
    finally:
        far("delete", "vm", "--all", "-n", b, "--wait=true", "--timeout=120s", check=False)
        far("delete", "namespace", b, "--wait=false", check=False)


def _move_far(k: Kubectl, cluster: Cluster, a: str, *, peer: PeerStack, b: str) -> None:
    far = peer.kubectl
    src = _Ends(kubectl=k, ns=a, vm="far", claim="far-src", storage_class="local-storage")
    dst = _Ends(kubectl=far, ns=b, vm="far", claim="far-dst", storage_class="local-storage")
    _, mark, on_disk, before, smbios = _marked_pair(cluster, src, dst)
    _wait(lambda: _phase(far, b, "vmi", "far") == "WaitingForSync", 60, "B's far WaitingForSync",
          lambda: _get(far, b, "vmi", "far").get("status"))  # fmt: skip
    mid = f"far-{uuid.uuid4().hex[:8]}"
    _apply(far, b, _vmim("in", "far", {"receive": {"migrationID": mid}}))

    def addresses() -> list[str]:
        return list(
            _get(far, b, "vmim", "in").get("status", {}).get("synchronizationAddresses", [])
        )

    (url, *_) = _wait(addresses, 60, "B's synchronization address",
                      lambda: _get(far, b, "vmim", "in").get("status"))  # fmt: skip
    assert url == _sync_address(far)  # B's leader, as B's KubeVirt CR says
    _apply(k, a, _vmim("out", "far", {"sendTo": {"migrationID": mid, "connectURL": url}}))

    def done() -> bool:
        return {_phase(k, a, "vmim", "out"), _phase(far, b, "vmim", "in")} <= {
            "Succeeded",
            "Failed",
        }

    _wait(done, 240, "both VMIMs final", lambda: (_get(k, a, "vmim", "out").get("status"),
                                                  _get(far, b, "vmim", "in").get("status"),
                                                  _sync_logs(k), _sync_logs(far)))  # fmt: skip
    sent, received = _get(k, a, "vmim", "out")["status"], _get(far, b, "vmim", "in")["status"]
    assert sent["phase"] == "Succeeded", sent.get("migrationState", {}).get("failureReason")
    assert received["phase"] == "Succeeded", received
    # A's source handler dialled B's handler at its pod address (B has no migration
    # network; A's handler dials from its own only for targets on that network).
    handlers = json.loads(far("get", "pods", "-n", "kubevirt", "-l", "kubevirt.io=virt-handler",
                              "-o", "json"))["items"]  # fmt: skip
    (handler,) = [p for p in handlers if p["spec"].get("nodeName") == peer.node]
    assert sent["migrationState"]["targetNodeAddress"] == handler["status"]["podIP"], sent
    moved = _running(far, b, "far")
    assert moved["status"]["nodeName"] == peer.node, moved["status"]
    _agent_connected(far, b, "far")  # the target's agent channel reconnects after the move
    after, marker, smbios_after = _probe(peer.cluster, moved)
    assert marker == mark and smbios_after == smbios and after > before, (after, before)
    assert _read(peer.cluster, moved, LIVE_SECTOR) == on_disk  # copied into B's claim
    # The target runs: only now is the source torn down.
    _wait(lambda: _phase(k, a, "vmi", "far") == "Succeeded", 60, "A's far VMI Succeeded",
          lambda: _get(k, a, "vmi", "far").get("status"))  # fmt: skip
    _wait(lambda: _get(k, a, "vm", "far")["spec"]["runStrategy"] == "Halted", 60,
          "A's far Halted", lambda: _get(k, a, "vm", "far")["spec"])  # fmt: skip
    k("delete", "vm", "far", "-n", a, "--wait=true", "--timeout=120s")
    _wait(lambda: far("get", "vm", "far", "-n", b, "-o", "jsonpath={.spec.runStrategy}")
          == "Always", 60, "B's far runStrategy restored")  # fmt: skip
    assert _probe(peer.cluster, moved)[1] == mark  # still running after the source went
