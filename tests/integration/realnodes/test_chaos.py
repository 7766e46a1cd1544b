"""Faults in the middle of an operation, on real nodes (docs/hardening.md's fault matrix).

Each trial hits one running operation and checks the end state an operator relies on:

- the source handler SIGKILLed while a VMI migrates: the migration ends (Succeeded or
  Failed, either is fine), the VMI is Running on exactly one node with exactly one QEMU;
- that VMI migrated again and the target node's kubelet and containerd SIGKILLed (then
  started again) while it migrates: the same end, with one live launcher pod;
- then that VMI's QEMU SIGKILLed: the VMI is Failed with a reason (a bare VMI is not
  restarted);
- the kubelet of a node stopped and started again while a VM's launcher pod starts there:
  the VM (runStrategy Always) is Running afterwards;
- a launcher pod deleted while its guest boots: the VMI ends (Succeeded or Failed) and no
  QEMU of it is left.

What each trial ended with is printed (`CHAOS <trial>: …`, see `pytest -s`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.procs import read_pidfile, stop_process
from tests.integration.realnodes.conftest import pods
from tests.integration.realnodes.test_story import REPO, _qemu_pids, _serial, _wait

pytestmark = [pytest.mark.cluster, pytest.mark.faults]
FINAL = ("Succeeded", "Failed")


def _tiny(name: str, *, node: str | None = None, grace: int = 1) -> dict[str, Any]:
    vmi: dict[str, Any] = yaml.safe_load((REPO / "examples" / "vmi-tiny.yaml").read_text())
    vmi["metadata"] = {"name": name}
    vmi["spec"]["terminationGracePeriodSeconds"] = grace
    if node:
        vmi["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    return vmi


def _get(k: Kubectl, kind: str, name: str, ns: str) -> dict[str, Any]:
    out = k("get", kind, name, "-n", ns, "-o", "json", check=False)
    found: dict[str, Any] = json.loads(out) if out else {}
    return found


def _phase(k: Kubectl, kind: str, name: str, ns: str) -> str:
    return str(_get(k, kind, name, ns).get("status", {}).get("phase", ""))


def _running(k: Kubectl, name: str, ns: str) -> dict[str, Any]:
    return _wait(  # type: ignore[no-any-return]
        lambda: (v := _get(k, "vmi", name, ns)).get("status", {}).get("phase") == "Running" and v,
        240, f"VMI {name} Running", lambda: _get(k, "vmi", name, ns).get("status"),
    )  # fmt: skip


def _node_of(pod: dict[str, Any]) -> str:
    spec: Any = pod["spec"]
    return str(spec.get("nodeName", ""))


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = obj["metadata"]
    return meta


def _handler_pod(k: Kubectl, node: str) -> dict[str, Any]:
    (pod,) = [p for p in pods(k, "kubevirt", "kubevirt.io=virt-handler") if _node_of(p) == node]
    return pod


def _pod_process(pod: dict[str, Any], program: bytes) -> int | None:
    """The process running `program` in `pod`'s containers, found by the pod's cgroup, as
    other clusters on this machine run the same programs (a virt-handler for a node01 too)."""
    uid = str(_meta(pod)["uid"])
    marks = (f"pod{uid}", f"pod{uid.replace('-', '_')}")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if not any(program in a for a in argv[:2]):
                continue
            cgroups = (entry / "cgroup").read_text()
            if any(m in cgroups for m in marks):
                return int(entry.name)
    return None


def _handler_pid(k: Kubectl, node: str) -> int | None:
    """This cluster's virt-handler process on `node`."""
    return _pod_process(_handler_pod(k, node), b"virt-handler")


def _handler_ready(k: Kubectl, node: str) -> bool:
    status: Any = _handler_pod(k, node).get("status", {})
    return any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", []))


def _one_qemu(domain: str) -> list[int]:
    return _wait(  # type: ignore[no-any-return]
        lambda: q if len(q := _qemu_pids(domain)) == 1 else None,
        60, f"exactly one QEMU for {domain}", lambda: _qemu_pids(domain),
    )  # fmt: skip


def _failed_with_reason(k: Kubectl, name: str, ns: str) -> dict[str, Any]:
    status: dict[str, Any] = _wait(
        lambda: (s := _get(k, "vmi", name, ns).get("status", {})).get("phase") in FINAL and s,
        120, f"VMI {name} final", lambda: _get(k, "vmi", name, ns).get("status"),
    )  # fmt: skip
    assert status["phase"] == "Failed" and status.get("reason"), status
    return status


def test_handler_killed_mid_migration_then_qemu_killed(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """SIGKILL the source node's virt-handler while a VMI migrates: the VMIM ends (either
    way), the VMI is Running on one node and exactly one QEMU runs it; the handler is back
    (Ready). Migrated again, the target node's kubelet and containerd are SIGKILLed while
    the VMIM is under way and started again: the VMIM ends, the VMI is Running on one node
    with exactly one QEMU and one live launcher pod. Then SIGKILL that QEMU: the VMI is
    Failed with a reason."""
    k, ns = real_stack, real_namespace
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(_tiny("chaos-mig")))
    source = _running(k, "chaos-mig", ns)["status"]["nodeName"]
    vmim = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
            "metadata": {"name": "chaos-mig-1"}, "spec": {"vmiName": "chaos-mig"}}  # fmt: skip
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(vmim))
    under_way = ("Scheduled", "PreparingTarget", "TargetReady", "Running", *FINAL)
    seen = _wait(lambda: (p := _phase(k, "vmim", "chaos-mig-1", ns)) in under_way and p,
                 240, "the migration under way", interval=0.05)  # fmt: skip
    pid = _handler_pid(k, source)
    assert pid is not None, f"no virt-handler process for {source}"
    os.kill(pid, signal.SIGKILL)

    ended = _wait(lambda: (p := _phase(k, "vmim", "chaos-mig-1", ns)) in FINAL and p,
                  240, "the migration ended", lambda: _get(k, "vmim", "chaos-mig-1", ns))  # fmt: skip
    _wait(lambda: _handler_ready(k, source), 120, f"virt-handler on {source} Ready again")
    vmi = _running(k, "chaos-mig", ns)
    qemu = _one_qemu(f"{ns}_chaos-mig")
    print(f"CHAOS handler-killed-mid-migration: killed at VMIM {seen}, VMIM {ended}, VMI "
          f"Running on {vmi['status']['nodeName']} (source {source}), 1 QEMU")  # fmt: skip

    asyncio.run(_runtime_killed_mid_migration(k, real_cluster, ns, "chaos-mig"))
    qemu = _one_qemu(f"{ns}_chaos-mig")
    os.kill(qemu[0], signal.SIGKILL)
    status = _failed_with_reason(k, "chaos-mig", ns)
    print(f"CHAOS qemu-killed: VMI Failed, {status['reason']}")


def _live_launchers(k: Kubectl, ns: str, vmi_uid: str) -> list[dict[str, Any]]:
    """The VMI's launcher pods that have not ended (not Succeeded or Failed)."""
    out = k("get", "pods", "-n", ns, "-l", f"kubevirt.io/created-by={vmi_uid}", "-o", "json")
    return [p for p in json.loads(out)["items"] if p.get("status", {}).get("phase") not in FINAL]


async def _runtime_killed_mid_migration(k: Kubectl, cluster: Cluster, ns: str, name: str) -> str:
    """Migrate `name`; once the target pod is being prepared, SIGKILL the target node's
    kubelet and containerd (the containers and their shims live on), then start them again;
    check the end state. The target node."""
    source = _get(k, "vmi", name, ns)["status"]["nodeName"]
    (target,) = {_node_of(p) for p in pods(k, "kubevirt", "kubevirt.io=virt-handler")} - {source}
    vmim = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
            "metadata": {"name": f"{name}-2"}, "spec": {"vmiName": name}}  # fmt: skip
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(vmim))
    under_way = ("PreparingTarget", "TargetReady", "Running", *FINAL)
    seen = _wait(lambda: (p := _phase(k, "vmim", f"{name}-2", ns)) in under_way and p,
                 240, "the second migration under way", interval=0.05)  # fmt: skip
    node = cluster.fleet().node(target)
    for component in ("kubelet", "containerd"):
        pid = read_pidfile(node.specs()[component].pidfile)
        assert pid is not None, f"no {component} on {target}"
        await stop_process(pid, marker=node.inputs.marker, grace=0, sig=signal.SIGKILL)
    await node.start_runtime()
    node.start_kubelet()
    ended = _wait(lambda: (p := _phase(k, "vmim", f"{name}-2", ns)) in FINAL and p, 240,
                  "the second migration ended", lambda: _get(k, "vmim", f"{name}-2", ns))  # fmt: skip
    _wait(lambda: _handler_ready(k, target), 120, f"virt-handler on {target} Ready again")
    vmi = _running(k, name, ns)
    _one_qemu(f"{ns}_{name}")
    uid = vmi["metadata"]["uid"]
    live = _wait(lambda: len(p := _live_launchers(k, ns, uid)) == 1 and p, 120,
                 f"one live launcher pod of {name}", lambda: _live_launchers(k, ns, uid))  # fmt: skip
    print(f"CHAOS target-runtime-killed-mid-migration: killed at VMIM {seen}, VMIM {ended}, "
          f"VMI Running on {vmi['status']['nodeName']} (target {target}), 1 QEMU, "
          f"1 live launcher pod on {_node_of(live[0])}")  # fmt: skip
    return str(target)


async def _bounce_kubelet(cluster: Cluster, node: str) -> None:
    """SIGTERM the node's kubelet (as `systemctl restart` does) and start it again."""
    real = cluster.fleet().node(node)
    pid = read_pidfile(real.specs()["kubelet"].pidfile)
    assert pid is not None, f"the kubelet of {node} is not running"
    await stop_process(pid, marker=real.inputs.marker, grace=20)
    real.start_kubelet()


def test_kubelet_bounced_during_vm_start_then_launcher_pod_deleted_mid_boot(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A VM (runStrategy Always) pinned to a node: once its launcher pod is bound there, the
    node's kubelet is stopped and started again; the VM is Running afterwards. Then a bare
    VMI's launcher pod is deleted while its guest boots: the VMI ends (Succeeded when the
    launcher's SIGTERM shut the guest down, as KubeVirt's does; Failed otherwise) and no
    QEMU of it is left."""
    k, ns = real_stack, real_namespace
    node = sorted(
        n["metadata"]["name"] for n in json.loads(k("get", "nodes", "-o", "json"))["items"]
    )[-1]
    template = _tiny("chaos-kubelet", node=node)
    vm = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
          "metadata": {"name": "chaos-kubelet"},
          "spec": {"runStrategy": "Always",
                   "template": {"metadata": {}, "spec": template["spec"]}}}  # fmt: skip
    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(vm))
    _wait(lambda: any(_node_of(p) == node for p in pods(k, ns, "kubevirt.io=virt-launcher")),
          120, "the VM's launcher pod bound to its node", interval=0.05)  # fmt: skip
    asyncio.run(_bounce_kubelet(real_cluster, node))
    vmi = _running(k, "chaos-kubelet", ns)
    assert vmi["status"]["nodeName"] == node
    _wait(lambda: _get(k, "vm", "chaos-kubelet", ns).get("status", {}).get("ready"),
          120, "the VM ready")  # fmt: skip
    attempts = len(pods(k, ns, f"kubevirt.io/created-by={vmi['metadata']['uid']}"))
    print(
        f"CHAOS kubelet-bounced-during-start: VM Running on {node}, "
        f"VMI {vmi['metadata']['uid'][:8]}, {attempts} launcher pod(s)"
    )
    k("delete", "vm", "chaos-kubelet", "-n", ns, "--wait=false")

    k("apply", "-n", ns, "-f", "-", stdin=json.dumps(_tiny("chaos-boot")))

    def booting() -> dict[str, Any] | None:
        vmi = _get(k, "vmi", "chaos-boot", ns)
        if vmi.get("status", {}).get("phase") not in ("Scheduled", "Running"):
            return None
        try:
            console = _serial(real_cluster, vmi)
        except (KeyError, ValueError):  # no launcher pod on its node in the status yet
            return None
        return vmi if "KUBEVIRT-PY-GUEST-BOOTED" not in console else None

    vmi = _wait(booting, 240, "chaos-boot's guest booting", interval=0.05)
    k("delete", "pods", "-n", ns, "-l", f"kubevirt.io/created-by={vmi['metadata']['uid']}",
      "--wait=false")  # fmt: skip
    status = _wait(
        lambda: (s := _get(k, "vmi", "chaos-boot", ns).get("status", {})).get("phase") in FINAL
        and s,
        120, "VMI chaos-boot final", lambda: _get(k, "vmi", "chaos-boot", ns).get("status"),
    )  # fmt: skip
    _wait(lambda: not _qemu_pids(f"{ns}_chaos-boot"), 60, "no QEMU of chaos-boot left")
    print(f"CHAOS launcher-pod-deleted-mid-boot: VMI {status['phase']}, {status.get('reason')}")
