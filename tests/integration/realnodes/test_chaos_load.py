"""Faults while VMs are created and deleted in bulk, on real nodes (docs/hardening.md's
fault matrix, "under load").

One story on one set of tiny guests:

- a replica set of ten VMIs created at once; once the controller has started acting on them
  its leader (the virt-controller process holding the Lease) is SIGKILLed, as a crash: the
  Lease goes to the replica that acquires it next (the killed one, restarted by its kubelet
  under the same identity, may renew it at once, as client-go's elector would);
- then the set scaled to five and three bare VMIs created at once, and etcd SIGKILLed (its
  supervisor, localkube/supervise.py, starts it again as systemd would on a host).

And a trial of its own: a node's small filesystem under a claim filled while a VMI on it
starts (the VMI held with the reason, then Running once the space is freed).

After each of the two faults every VMI ends Running exactly once (one launcher pod, one QEMU on the
nodes) or Failed with a reason; the deleted ones leave no pod and no QEMU; at the end no
QEMU of the namespace is left and no pod of it stays Terminating.

What each trial ended with is printed (`CHAOS <trial>: …`, see `pytest -s`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.procs import read_pidfile
from localkube.realnode.node import RealNode
from tests.integration.realnodes.test_chaos import (
    _get,
    _handler_pod,
    _handler_ready,
    _one_qemu,
    _pod_process,
    _running,
    _tiny,
)
from tests.integration.realnodes.test_fleet import leader_pod, replica_set
from tests.integration.realnodes.test_story import _qemu_pids, _wait

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
FINAL = ("Running", "Failed", "Succeeded")


def _list(k: Kubectl, kind: str, ns: str, selector: str = "") -> list[dict[str, Any]]:
    """Objects of `kind` in `ns`; [] while the API does not answer (etcd restarting)."""
    args = ["get", kind, "-n", ns, "-o", "json", *(["-l", selector] if selector else [])]
    out = k(*args, check=False)
    try:
        items: list[dict[str, Any]] = json.loads(out)["items"] if out else []
    except ValueError:
        return []
    return items


def _phases(k: Kubectl, ns: str) -> dict[str, str]:
    return {
        v["metadata"]["name"]: v.get("status", {}).get("phase", "") for v in _list(k, "vmi", ns)
    }


def _create(k: Kubectl, ns: str, names: list[str]) -> None:
    """All of them in one request (a List), as a burst."""
    items = [_tiny(n) for n in names]
    k(
        "apply",
        "-n",
        ns,
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
    )


def _settled(k: Kubectl, ns: str, names: list[str]) -> dict[str, dict[str, Any]]:
    """Wait until each of `names` is Running or final; their VMIs by name."""

    def done() -> dict[str, dict[str, Any]] | None:
        vmis = {v["metadata"]["name"]: v for v in _list(k, "vmi", ns)}
        phases = [vmis.get(n, {}).get("status", {}).get("phase") for n in names]
        return vmis if all(p in FINAL for p in phases) else None

    found: dict[str, dict[str, Any]] = _wait(done, 300, f"{names} Running or final",
                                             lambda: _phases(k, ns), interval=2)  # fmt: skip
    return found


def _exactly_once(k: Kubectl, ns: str, names: list[str]) -> Counter[str]:
    """Every VMI of `names` Running with one launcher pod and one QEMU, or Failed with a
    reason; the count of each outcome."""
    vmis = _settled(k, ns, names)
    launchers = Counter(
        p["metadata"]["labels"].get("kubevirt.io/created-by", "")
        for p in _list(k, "pods", ns, "kubevirt.io=virt-launcher")
        if p.get("status", {}).get("phase") not in ("Failed", "Succeeded")
    )
    outcome: Counter[str] = Counter()
    for name in names:
        status, uid = vmis[name].get("status", {}), vmis[name]["metadata"]["uid"]
        if status["phase"] == "Running":
            assert launchers[uid] == 1, f"{name}: {launchers[uid]} launcher pods"
            _one_qemu(f"{ns}_{name}")
        else:
            assert status["phase"] == "Failed" and status.get("reason"), (name, status)
        outcome[status["phase"] if status["phase"] == "Running" else status["reason"]] += 1
    return outcome


def _gone(k: Kubectl, ns: str, names: list[str]) -> None:
    """No VMI, launcher pod or QEMU of `names` left."""

    def left() -> list[str]:
        vmis = set(_phases(k, ns))
        pods = {p["metadata"].get("annotations", {}).get("kubevirt.io/domain", "")
                for p in _list(k, "pods", ns, "kubevirt.io=virt-launcher")}  # fmt: skip
        return [n for n in names if n in vmis or n in pods or _qemu_pids(f"{ns}_{n}")]

    _wait(lambda: not left(), 180, f"{names} gone", left, interval=2)


def _namespace_qemu(ns: str) -> list[int]:
    """QEMU processes running any domain of namespace `ns` (``guest=<ns>_<name>``)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
            if b"qemu-system" in argv.split(b"\0")[0] and f"guest={ns}_".encode() in argv:
                found.append(int(entry.name))
    return found


def _kill_leader(k: Kubectl) -> str:
    """SIGKILL the virt-controller process holding the Lease; its pod name."""
    name = leader_pod(k)
    pod = json.loads(k("get", "pod", name, "-n", "kubevirt", "-o", "json"))
    pid = _pod_process(pod, b"virt-controller")
    assert pid is not None, f"no virt-controller process in pod {name}"
    os.kill(pid, signal.SIGKILL)
    return name


def _kill_etcd(cluster: Cluster) -> int:
    """SIGKILL etcd (not its supervisor); the killed pid."""
    supervisor = read_pidfile(cluster.paths.pidfile("etcd"))
    assert supervisor is not None, "etcd's supervisor is not running"
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()
    assert len(children) == 1, f"etcd's supervisor has children {children}"
    os.kill(int(children[0]), signal.SIGKILL)
    return int(children[0])


def _set_running(k: Kubectl, ns: str, n: int) -> tuple[list[str], int]:
    """Wait until the set has exactly n members (not being deleted), all Running, and says
    so in its status; their names, and the most members seen at once meanwhile."""
    most = 0

    def done() -> list[str] | None:
        nonlocal most
        live = [v for v in _list(k, "vmi", ns, "fleet=web")
                if "deletionTimestamp" not in v["metadata"]]  # fmt: skip
        most = max(most, len(live))
        up = [v["metadata"]["name"] for v in live if v.get("status", {}).get("phase") == "Running"]
        status = next(iter(_list(k, "vmirs", ns)), {}).get("status", {})
        return up if len(up) == n == len(live) == status.get("replicas") else None

    names: list[str] = _wait(done, 300, f"{n} Running members", lambda: _phases(k, ns), interval=2)
    return names, most


def _controllers_ready(k: Kubectl) -> bool:
    pods = _list(k, "pods", "kubevirt", "kubevirt.io=virt-controller")
    return len(pods) == 2 and all(
        any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in p.get("status", {}).get("conditions", [])
        )
        for p in pods
    )


def test_leader_killed_in_a_burst_of_ten_then_etcd_killed_mid_churn(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A replica set of ten created at once; once its first launcher pod exists the leading
    virt-controller is SIGKILLed: whichever replica leads next starts from its caches and
    the set ends with exactly ten members, never more, each Running with one launcher pod and one QEMU
    (or Failed with a reason); the killed replica comes back. Then the set scaled to five
    and three bare VMIs created at once, and etcd SIGKILLed: the five removed leave no VMI,
    pod or QEMU, the other eight end as above, and the control plane is healthy again.
    Deleting everything leaves no QEMU of the namespace and no Terminating pod."""
    k, ns = real_stack, real_namespace
    k("apply", "-f", "-", stdin=json.dumps(replica_set(ns, 10)))
    try:
        _story(k, real_cluster, ns)
    finally:
        k("delete", "vmirs", "--all", "-n", ns, "--wait=true", "--timeout=120s", check=False)


def _story(k: Kubectl, cluster: Cluster, ns: str) -> None:
    _wait(lambda: _list(k, "pods", ns, "kubevirt.io=virt-launcher"), 120,
          "the first launcher pod of the burst", interval=0.2)  # fmt: skip
    killed = _kill_leader(k)
    burst, most = _set_running(k, ns, 10)
    outcome = _exactly_once(k, ns, burst)
    assert most == 10, f"{most} members at once"
    _wait(lambda: _controllers_ready(k), 120, "both controller replicas Ready again")
    print(f"CHAOS leader-killed-in-burst: killed {killed}, new leader {leader_pod(k)}, "
          f"10 members, never more: {dict(outcome)}")  # fmt: skip

    added = [f"churn-{i}" for i in range(3)]
    k("scale", "vmirs", "web", "-n", ns, "--replicas=5")
    _create(k, ns, added)
    etcd = _kill_etcd(cluster)
    kept, _ = _set_running(k, ns, 5)
    _gone(k, ns, sorted(set(burst) - set(kept)))
    outcome = _exactly_once(k, ns, kept + added)
    _wait(lambda: all(s.healthy for s in asyncio.run(cluster.status())), 120,
          "the control plane healthy again")  # fmt: skip
    print(f"CHAOS etcd-killed-mid-churn: etcd pid {etcd} killed, 5 removed gone, "
          f"8 VMIs: {dict(outcome)}")  # fmt: skip

    k("delete", "vmirs", "web", "-n", ns, "--wait=false")
    k("delete", "vmi", *added, "-n", ns, "--wait=false")
    _gone(k, ns, kept + added)
    stuck = [p["metadata"]["name"] for p in _list(k, "pods", ns)]
    assert stuck == [], f"pods left: {stuck}"
    assert not _namespace_qemu(ns), f"QEMU of the namespace left: {_namespace_qemu(ns)}"


CLAIM_SIZE = "48Mi"  # the claim's disk.img; the filesystem under it holds 64 MiB
FULL_SOURCE = "kvpy-chaos-full"  # the tmpfs' source name, to find its mounts


def _in_node(node: RealNode, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run `argv` in the node's mount namespace (where its kubelet mounts volumes)."""
    return subprocess.run([*node.ns.enter(), *argv], capture_output=True, text=True, timeout=60)


def _small_claim(cluster: Cluster, k: Kubectl, ns: str, node: str) -> tuple[str, Path]:
    """A 64 MiB filesystem on `node` (a size-limited tmpfs, as a small disk) under a local PV
    of CLAIM_SIZE, and a claim `small` bound to it; the PV's name and directory."""
    pv = cluster.storage().volume(node, 99)
    pv["metadata"]["name"] = name = f"chaos-full-{ns}"
    pv["spec"]["capacity"]["storage"] = CLAIM_SIZE
    path = Path(pv["spec"]["local"]["path"])
    path.mkdir(parents=True, exist_ok=True)
    mounted = _in_node(cluster.fleet().node(node), "mount", "-t", "tmpfs", "-o", "size=64m",
                       FULL_SOURCE, str(path))  # fmt: skip
    assert mounted.returncode == 0, mounted.stderr
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "small"},
             "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": name,
                      "storageClassName": pv["spec"]["storageClassName"],
                      "resources": {"requests": {"storage": CLAIM_SIZE}}}}  # fmt: skip
    k("apply", "-f", "-", stdin=json.dumps(pv))
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(claim))
    return name, path


def _on_claim(name: str) -> dict[str, Any]:
    vmi = _tiny(name)
    spec = vmi["spec"]
    spec["domain"]["devices"]["disks"].append({"name": "data", "disk": {"bus": "virtio"}})
    spec["volumes"].append({"name": "data", "persistentVolumeClaim": {"claimName": "small"}})
    return vmi


def _restarts(pod: dict[str, Any]) -> int:
    return sum(c.get("restartCount", 0) for c in pod.get("status", {}).get("containerStatuses", []))


def _full_mounts(node: RealNode) -> list[str]:
    """Mount points of the small filesystem seen in the node's mount namespace."""
    out = _in_node(node, "cat", "/proc/self/mountinfo").stdout
    return [line.split()[4] for line in out.splitlines() if f" {FULL_SOURCE} " in line]


def _sync_failure(k: Kubectl, name: str, ns: str) -> dict[str, Any]:
    """Wait for the VMI's Synchronized=False condition (or its end); that condition."""

    def seen() -> dict[str, Any] | None:
        status = _get(k, "vmi", name, ns).get("status", {})
        assert status.get("phase") not in ("Running", "Failed", "Succeeded"), status
        conds = [c for c in status.get("conditions", []) if c["type"] == "Synchronized"]
        return conds[0] if conds and conds[0]["status"] == "False" else None

    found: dict[str, Any] = _wait(seen, 180, f"{name} Synchronized=False",
                                  lambda: _get(k, "vmi", name, ns).get("status"))  # fmt: skip
    return found


def test_a_full_disk_under_a_claim_holds_the_vm_start_until_space_is_freed(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A node's small filesystem holding a claim's directory is filled (a file taking all of
    it) before a VMI on that claim starts: the VMI does not run and says why
    (Synchronized=False, DiskError naming the lack of space, as KubeVirt's handler keeps
    retrying such a sync), no disk.img is made, and the node's virt-handler stays up
    (Ready, not restarted). With the file removed the same VMI runs on its claim. Deleted,
    it leaves no pod, no QEMU and no mount of the filesystem but its own."""
    k, ns = real_stack, real_namespace
    nodes = json.loads(k("get", "nodes", "-o", "json"))["items"]
    name = sorted(n["metadata"]["name"] for n in nodes)[-1]
    node, handler = real_cluster.fleet().node(name), _handler_pod(k, name)
    pv, path = _small_claim(real_cluster, k, ns, name)
    try:
        _in_node(node, "dd", "if=/dev/zero", f"of={path}/fill", "bs=1M")  # until ENOSPC
        k("apply", "-n", ns, "-f", "-", stdin=json.dumps(_on_claim("chaos-full")))
        cond = _sync_failure(k, "chaos-full", ns)
        assert cond["reason"] == "DiskError" and "not enough space" in cond["message"], cond
        assert _in_node(node, "ls", str(path)).stdout.split() == ["fill"]
        assert _handler_ready(k, name)
        assert _restarts(_handler_pod(k, name)) == _restarts(handler)

        _in_node(node, "rm", f"{path}/fill")
        ran = _running(k, "chaos-full", ns)
        assert ran["status"]["nodeName"] == name
        assert _in_node(node, "ls", str(path)).stdout.split() == ["disk.img"]
        k("delete", "vmi", "chaos-full", "-n", ns, "--wait=false")
        _gone(k, ns, ["chaos-full"])
        print(f"CHAOS disk-full-at-start: VMI held, {cond['reason']}: {cond['message'][-90:]}; "
              f"handler up; with the file removed Running on {name}; then gone")  # fmt: skip
    finally:
        k("delete", "pvc", "small", "-n", ns, "--wait=true", "--timeout=60s", check=False)
        k("delete", "pv", pv, "--wait=true", "--timeout=60s", check=False)
        left = _full_mounts(node)
        _in_node(node, "umount", str(path))
    assert left == [str(path)], f"mounts of the small filesystem: {left}"
    assert _full_mounts(node) == []
