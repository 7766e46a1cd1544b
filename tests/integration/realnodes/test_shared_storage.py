"""PVC disks across a live migration on real nodes. KubeVirt's rule: a VMI live-migrates
with a claim only when the claim is ReadWriteMany (shared storage, never copied); any other
claim makes it LiveMigratable=False (DisksNotLiveMigratable) and its VMIM fails.

The shared claim is on the cluster's `shared-storage` class: ReadWriteMany local PVs on one
host directory every node mounts, the stand-in for NFS (localkube/realnode/storage.py). The
same VM has a hostDisk marked `shared: true` in that directory too: a path every node sees,
migrated the same way (left in place, opened by the target).
Data is written and read inside the guest through its agent (`guest-exec`, with the guest's
page cache dropped before each read, so what is read comes from the disk)."""

from __future__ import annotations

import base64
import json
import subprocess
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.realnode.storage import SHARED_SUBDIR
from tests.integration.realnodes.test_migration import _last_tick, _private
from tests.integration.realnodes.test_storage import _apply, _disk_lines, _get, _running
from tests.integration.realnodes.test_story import _pod_uid, _virtctl, _wait

pytestmark = pytest.mark.cluster
IMAGE = "registry.local/kubevirt-py/tiny-guest:v1"
LIVE_SECTOR = 8  # the data written while running lives at 4 KiB (the boot counter at 0)
MOVED_SECTOR = 16  # and what the target writes after the migration at 8 KiB
HOST_DISK = "shared-hd"  # the VM's hostDisk volume (shared: true), vdc in the guest


def _claim(name: str, *, mode: str, storage_class: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": [mode], "resources": {"requests": {"storage": "64Mi"}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": spec}  # fmt: skip


def _template(claim: str) -> dict[str, Any]:
    """The tiny guest booting its containerDisk (copied by the migration), with the claim
    as vdb (shared, not copied); it bumps the counter at vdb's start at each boot."""
    return {
        "metadata": {"labels": {"kubevirt.io/vm": "shared"}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "domain": {
                "memory": {"guest": "128Mi"},
                "resources": {"requests": {"memory": "128Mi"}},
                "firmware": {
                    "kernelBoot": {
                        "kernelArgs": "console=ttyS0 panic=-1 quiet kvpy.disk=vdb",
                        "container": {
                            "image": IMAGE,
                            "kernelPath": "/boot/vmlinuz",
                            "initrdPath": "/boot/initrd.img",
                        },
                    }
                },
                "devices": {
                    "disks": [
                        {"name": "containerdisk", "disk": {"bus": "virtio"}},
                        {"name": "data", "disk": {"bus": "virtio"}},
                    ]
                },
            },
            "volumes": [
                {"name": "containerdisk", "containerDisk": {"image": IMAGE}},
                {"name": "data", "persistentVolumeClaim": {"claimName": claim}},
            ],
        },
    }


def _with_shared_host_disk(template: dict[str, Any], path: Path) -> dict[str, Any]:
    """The template with a hostDisk at `path` (shared: true; made at the first start) as vdc."""
    spec = template["spec"]
    spec["domain"]["devices"]["disks"].append({"name": HOST_DISK, "disk": {"bus": "virtio"}})
    source = {"path": str(path), "type": "DiskOrCreate", "capacity": "16Mi", "shared": True}
    spec["volumes"].append({"name": HOST_DISK, "hostDisk": source})
    return template


def _domain_xml(cluster: Cluster, vmi: dict[str, Any]) -> ET.Element:
    """The domain the VMI's launcher runs now, as libvirt dumps it."""
    domain = f"{vmi['metadata']['namespace']}_{vmi['metadata']['name']}"
    with _libvirt(cluster, vmi) as uri:
        done = subprocess.run(["virsh", "-c", uri, "dumpxml", domain],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return ET.fromstring(done.stdout)


def _host_disk_xml(cluster: Cluster, vmi: dict[str, Any]) -> ET.Element:
    """The shared hostDisk's <disk> in the domain the VMI's launcher runs now."""
    disks = _domain_xml(cluster, vmi).iterfind("devices/disk")
    (disk,) = [d for d in disks if d.find(f"alias[@name='ua-{HOST_DISK}']") is not None]
    return disk


def _assert_shared_host_disk(disk: ET.Element) -> None:
    """A raw file opened with cache none (the disk's file system, ext4, has O_DIRECT)."""
    driver, source, target = disk.find("driver"), disk.find("source"), disk.find("target")
    assert driver is not None and source is not None and target is not None
    assert (driver.get("type"), driver.get("cache")) == ("raw", "none"), ET.tostring(disk)
    assert target.get("dev") == "vdc", ET.tostring(disk)
    assert (source.get("file") or "").endswith(f"/{HOST_DISK}/disk.img"), ET.tostring(disk)


@contextmanager
def _libvirt(cluster: Cluster, vmi: dict[str, Any]) -> Iterator[str]:
    """A libvirt URI for the VMI's launcher's own daemon (its socket in the pod's private
    emptyDir, reached through a short link: the pod path is longer than sun_path; the
    session driver when the daemon runs as the launcher's non-root user)."""
    node, uid = _pod_uid(vmi)
    socket = _private(cluster, node, uid) / "libvirt" / "sock" / "libvirt-sock"
    with tempfile.TemporaryDirectory(prefix="kv-", dir="/tmp") as tmp:
        link = Path(tmp) / "s"
        link.symlink_to(socket)
        # A non-root launcher (the default) runs a session daemon, which refuses /system.
        driver = "system" if socket.stat().st_uid == 0 else "session"
        yield f"qemu+unix:///{driver}?socket={link}"


def _agent(uri: str, domain: str, command: dict[str, Any]) -> Any:
    argv = ["virsh", "-c", uri, "qemu-agent-command", domain, json.dumps(command),
            "--timeout", "20"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{command['execute']}: {done.stderr}"
    return json.loads(done.stdout)["return"]


def _guest_sh(cluster: Cluster, vmi: dict[str, Any], script: str) -> str:
    """Run `sh -c script` in the guest (qemu-ga's guest-exec); its stdout."""
    domain = f"{vmi['metadata']['namespace']}_{vmi['metadata']['name']}"
    with _libvirt(cluster, vmi) as uri:
        args = {"path": "/bin/sh", "arg": ["-c", script], "capture-output": True}
        pid = _agent(uri, domain, {"execute": "guest-exec", "arguments": args})["pid"]
        status: dict[str, Any] = {}
        for _ in range(100):
            status = _agent(uri, domain, {"execute": "guest-exec-status",
                                          "arguments": {"pid": pid}})  # fmt: skip
            if status.get("exited"):
                break
            time.sleep(0.2)
    assert status.get("exitcode") == 0, status
    return base64.b64decode(status.get("out-data", "")).decode()


def _write(
    cluster: Cluster, vmi: dict[str, Any], sector: int, text: str, *, dev: str = "vdb"
) -> None:
    script = f"printf '{text}\\n' | dd of=/dev/{dev} bs=512 seek={sector} conv=notrunc,fsync"
    _guest_sh(cluster, vmi, script)


def _read(cluster: Cluster, vmi: dict[str, Any], sector: int, *, dev: str = "vdb") -> str:
    """The first line at `sector` of `dev` as the guest reads it from the disk."""
    script = (
        "sync; echo 3 >/proc/sys/vm/drop_caches; "
        f"dd if=/dev/{dev} bs=512 skip={sector} count=1 2>/dev/null | tr -d '\\000' | head -n 1"
    )
    return _guest_sh(cluster, vmi, script).strip()


def _agent_connected(k: Kubectl, ns: str, name: str) -> None:
    """Wait for the guest agent (what guest-exec goes through) of a freshly booted guest."""

    def connected() -> bool:
        conds = _get(k, ns, "vmi", name).get("status", {}).get("conditions", [])
        return any(c["type"] == "AgentConnected" and c["status"] == "True" for c in conds)

    _wait(connected, 120, f"VMI {name}'s guest agent connected")


def _launcher_log_event(k: Kubectl, ns: str, pod: str, event: str) -> dict[str, Any]:
    out = k("logs", "-n", ns, pod, "-c", "compute", check=False)
    for line in out.splitlines():
        if f'"{event}"' in line:
            found: dict[str, Any] = json.loads(line[line.index("{") :])
            return found
    raise AssertionError(f"no {event} in {pod}'s log:\n{out[-2000:]}")


def test_vm_on_a_read_write_many_claim_live_migrates_and_keeps_its_data(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A VM on a ReadWriteMany claim (shared storage): LiveMigratable=True; data written
    in the guest on the source is read by the same guest on the other node after a live
    migration through the proxy (console ticking on), the source copied only the
    containerDisk overlay and left the claim's disk to the target, which opened the very
    same disk.img; what the target writes lands in that file, and both survive a VM restart
    (the boot counter goes on from 1). Its hostDisk with `shared: true` (vdc, a file in the
    directory every node sees) goes the same way: made at the first start, opened raw with
    cache none on both nodes, not copied by the migration; the target reads what the source
    wrote, and both sides' writes are in the one file on the host, read again after a
    restart."""
    k, ns, kubeconfig = real_stack, real_namespace, real_cluster.kubeconfig
    _apply(k, ns, _claim("shared", mode="ReadWriteMany", storage_class="shared-storage"))
    host_disk = real_cluster.config.nodes_dir / SHARED_SUBDIR / f"hostdisk-{ns}" / "disk.img"
    template = _with_shared_host_disk(_template("shared"), host_disk)
    vm = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
          "metadata": {"name": "shared"},
          "spec": {"runStrategy": "Always", "template": template}}  # fmt: skip
    _apply(k, ns, vm)
    first = _running(k, ns, "shared")
    assert _disk_lines(real_cluster, first, 1) == ["KUBEVIRT-PY-DISK vdb ro=0 found=0 wrote=1"]
    (data,) = [v for v in first["status"]["volumeStatus"] if v["name"] == "data"]
    info = data["persistentVolumeClaimInfo"]
    assert (info["claimName"], info["accessModes"]) == ("shared", ["ReadWriteMany"])
    _wait(lambda: any(c["type"] == "LiveMigratable" and c["status"] == "True"
                      for c in _get(k, ns, "vmi", "shared")["status"].get("conditions", [])),
          60, "LiveMigratable=True")  # fmt: skip
    _agent_connected(k, ns, "shared")
    live = f"KVPY-LIVE {uuid.uuid4().hex[:12]}"
    _write(real_cluster, first, LIVE_SECTOR, live)
    _write(real_cluster, first, LIVE_SECTOR, f"{live} vdc", dev="vdc")
    _assert_shared_host_disk(_host_disk_xml(real_cluster, first))
    source, source_pod = _pod_uid(first)
    source_name = _pod_name(k, ns, source_pod)
    before = _last_tick(real_cluster, source, source_pod)

    done = _virtctl(kubeconfig, ns, "migrate", "shared", "--wait", "--timeout", "240")
    assert done.returncode == 0, done.stderr
    moved = _moved(k, ns, "shared", source)
    assert moved["metadata"]["uid"] == first["metadata"]["uid"]  # the same guest, moved
    target, target_pod = _pod_uid(moved)
    _wait(lambda: _last_tick(real_cluster, target, target_pod) > before, 120,
          "ticks continue on the target's console")  # fmt: skip
    assert _read(real_cluster, moved, LIVE_SECTOR) == live
    assert _read(real_cluster, moved, LIVE_SECTOR, dev="vdc") == f"{live} vdc"
    _assert_shared_host_disk(_host_disk_xml(real_cluster, moved))
    after = f"KVPY-MOVED {uuid.uuid4().hex[:12]}"
    _write(real_cluster, moved, MOVED_SECTOR, after)
    _write(real_cluster, moved, MOVED_SECTOR, f"{after} vdc", dev="vdc")

    started = _launcher_log_event(k, ns, source_name, "migration_started")
    assert (started["disks"], started["shared_disks"]) == (["vda"], ["vdb", "vdc"]), started
    on_host = host_disk.read_bytes()  # the one file both nodes opened, left in place
    assert on_host[LIVE_SECTOR * 512 :].startswith(f"{live} vdc\n".encode())
    assert on_host[MOVED_SECTOR * 512 :].startswith(f"{after} vdc\n".encode())
    claim = _get(k, ns, "pvc", "shared")
    pv = _get(k, ns, "pv", claim["spec"]["volumeName"])
    disk = (Path(pv["spec"]["local"]["path"]) / "disk.img").read_bytes()
    assert disk.startswith(b"KVPY-COUNT 1\n")
    assert disk[LIVE_SECTOR * 512 :].startswith(live.encode())
    assert disk[MOVED_SECTOR * 512 :].startswith(after.encode())

    restarted = _virtctl(kubeconfig, ns, "restart", "shared")
    assert restarted.returncode == 0, restarted.stderr
    second = _running(k, ns, "shared", not_uid=first["metadata"]["uid"])
    assert _disk_lines(real_cluster, second, 1) == ["KUBEVIRT-PY-DISK vdb ro=0 found=1 wrote=2"]
    _agent_connected(k, ns, "shared")
    assert _read(real_cluster, second, LIVE_SECTOR) == live
    assert _read(real_cluster, second, MOVED_SECTOR) == after
    assert _read(real_cluster, second, MOVED_SECTOR, dev="vdc") == f"{after} vdc"


def _moved(k: Kubectl, ns: str, name: str, source: str) -> dict[str, Any]:
    """The VMI once its status names a node other than `source` (a migration ended)."""
    found: dict[str, Any] = _wait(
        lambda: (v := _get(k, ns, "vmi", name)).get("status", {}).get("nodeName")
        not in (None, source) and v,
        120, "the VMI on the other node", lambda: _get(k, ns, "vmi", name).get("status"),
    )  # fmt: skip
    return found


def _pod_name(k: Kubectl, ns: str, uid: str) -> str:
    pods = json.loads(k("get", "pods", "-n", ns, "-o", "json"))["items"]
    (name,) = [p["metadata"]["name"] for p in pods if p["metadata"]["uid"] == uid]
    return str(name)


def test_vmi_on_a_read_write_once_claim_is_not_migratable(
    real_stack: Kubectl, real_cluster: Cluster, real_namespace: str
) -> None:
    """A VMI on a ReadWriteOnce claim (a node-local PV): LiveMigratable=False with
    DisksNotLiveMigratable naming the claim; its VMIM fails saying why, and the guest
    stays where it was."""
    k, ns = real_stack, real_namespace
    _apply(k, ns, _claim("local", mode="ReadWriteOnce", storage_class="local-storage"))
    vmi = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
           "metadata": {"name": "pinned"}, "spec": _template("local")["spec"]}  # fmt: skip
    _apply(k, ns, vmi)
    running = _running(k, ns, "pinned")

    def migratable() -> dict[str, Any] | None:
        conds = _get(k, ns, "vmi", "pinned").get("status", {}).get("conditions", [])
        return next((c for c in conds if c["type"] == "LiveMigratable"), None)

    cond = _wait(migratable, 60, "the LiveMigratable condition")
    assert (cond["status"], cond["reason"]) == ("False", "DisksNotLiveMigratable"), cond
    assert "PVC local is not shared (ReadWriteOnce)" in cond["message"], cond
    vmim = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
            "metadata": {"name": "try"}, "spec": {"vmiName": "pinned"}}  # fmt: skip
    _apply(k, ns, vmim)

    def failed() -> dict[str, Any] | None:
        status: dict[str, Any] = _get(k, ns, "vmim", "try").get("status", {})
        return status if status.get("phase") == "Failed" else None

    status = _wait(failed, 60, "the VMIM Failed", lambda: _get(k, ns, "vmim", "try").get("status"))
    why = status["migrationState"]["failureReason"]
    assert "not live-migratable" in why and "PVC local is not shared" in why, why
    after = _get(k, ns, "vmi", "pinned")
    assert after["status"]["nodeName"] == running["status"]["nodeName"]
    assert after["status"]["phase"] == "Running"
