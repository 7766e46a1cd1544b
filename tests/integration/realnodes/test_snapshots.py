"""Snapshots, restores and clones on real nodes: snapshot.kubevirt.io and clone.kubevirt.io
served by kubevirt-py's controllers over the test bed's real CSI stack (class csi-local,
VolumeSnapshotClass csi-local-snapshots, Kubernetes' own snapshot-controller and
csi-snapshotter).

The guest is the tiny test guest booted with kvpy.disk=vda: each boot reads the counter at
the start of its claim-backed vda and writes the next one, printing both on the serial
console, so the counter is the data: 1 after the first boot (marker A), 2 after the second
(marker B). Its real qemu-ga answers the freeze; stopped (SIGSTOP over ssh) it answers
nothing, as a hung agent would. The same VM then carries a snapshot, a restore, a clone and
an export through a restart of the leading controller."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from localkube.cluster import Cluster
from localkube.deploy import Kubectl
from localkube.errors import LocalKubeError
from tests.integration.realnodes.backup_story import backup_story, scratch_disk
from tests.integration.realnodes.test_datavolumes import _guest_spec
from tests.integration.realnodes.test_fleet import leader_pod
from tests.integration.realnodes.test_live_change import kv_restored
from tests.integration.realnodes.test_remote_access import ssh_key, virtctl_py
from tests.integration.realnodes.test_storage import _apply, _get, _running
from tests.integration.realnodes.test_storage import _claim as _storage_claim
from tests.integration.realnodes.test_story import (
    REPO,
    _condition,
    _reasons,
    _serial,
    _virtctl,
    _wait,
)

pytestmark = pytest.mark.cluster
__all__ = ["kv_restored", "ssh_key"]
SNAP_API = "snapshot.kubevirt.io/v1beta1"
VM_REF = {"apiGroup": "kubevirt.io", "kind": "VirtualMachine"}
MAC_SRC = "02:5e:00:00:00:01"
MAC_CLONE = "02:5e:00:00:00:02"


def _vm(name: str, claim: str, public_key: str) -> dict[str, Any]:
    """The guest on the claim (vda), with the key in its NoCloud user data (vdb)."""
    spec = _guest_spec({"persistentVolumeClaim": {"claimName": claim}})
    spec["domain"]["devices"]["disks"].append({"name": "cloudinit", "disk": {"bus": "virtio"}})
    user_data = f"#cloud-config\nssh_authorized_keys:\n  - {public_key}\n"
    spec["volumes"].append({"name": "cloudinit", "cloudInitNoCloud": {"userData": user_data}})
    disk, volume = scratch_disk()  # vdc: the backups' qcow2 disk (backup_story.py)
    spec["domain"]["devices"]["disks"].append(disk)
    spec["volumes"].append(volume)
    spec["domain"]["devices"]["interfaces"] = [
        {"name": "default", "masquerade": {}, "macAddress": MAC_SRC}
    ]
    spec["networks"] = [{"name": "default", "pod": {}}]
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name, "labels": {"app": "snap-story"}},
        "spec": {"runStrategy": "Always", "template": {"spec": spec}},
    }


def _claim(name: str) -> dict[str, Any]:
    claim = _storage_claim(name)
    claim["spec"]["storageClassName"] = "csi-local"  # the CSI class, with snapshots
    claim["spec"]["resources"]["requests"]["storage"] = "64Mi"
    return claim


def _obj(kind: str, name: str, spec: dict[str, Any], api: str = SNAP_API) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name}, "spec": spec}


def _counter(cluster: Cluster, vmi: dict[str, Any]) -> str:
    """This boot's disk line (found=<n> wrote=<n+1>)."""

    def probe() -> str | None:
        m = re.search(r"^KUBEVIRT-PY-DISK vda .*$", _serial(cluster, vmi), re.M)
        return m.group(0).strip() if m else None

    line: str = _wait(probe, 180, "the guest's disk line", lambda: _serial(cluster, vmi)[-400:])
    return line


def _until(k: Kubectl, ns: str, kind: str, name: str, ok: Any, what: str) -> dict[str, Any]:
    found: dict[str, Any] = _wait(
        lambda: (o := _get(k, ns, kind, name)) and ok(o.get("status") or {}) and o,
        180,
        what,
        lambda: _get(k, ns, kind, name).get("status"),
    )
    return found


def _refused(k: Kubectl, ns: str, obj: dict[str, Any]) -> str:
    obj["metadata"]["namespace"] = ns
    with pytest.raises(LocalKubeError) as e:
        k("create", "-f", "-", stdin=json.dumps(obj))
    return str(e.value)


def _boot(
    k: Kubectl, cluster: Cluster, ns: str, name: str, *, not_uid: str = ""
) -> tuple[dict[str, Any], str]:
    vmi = _running(k, ns, name, not_uid=not_uid)
    return vmi, _counter(cluster, vmi)


def _online_snapshot(k: Kubectl, ns: str, name: str) -> dict[str, Any]:
    """Snapshot of the running src: frozen, VolumeSnapshot created, thawed, readyToUse;
    its one volume backup."""
    _apply(k, ns, _obj("VirtualMachineSnapshot", name, {"source": {**VM_REF, "name": "src"}}))
    snap = _until(k, ns, "vmsnapshot", name, lambda s: s.get("phase") in ("Succeeded", "Failed"),
                  f"snapshot {name} final")  # fmt: skip
    status = snap["status"]
    assert status["phase"] == "Succeeded" and status["readyToUse"] is True, status
    assert status["indications"] == ["Online", "GuestAgent"], status
    assert status["snapshotVolumes"]["includedVolumes"] == ["data"], status
    uid = snap["metadata"]["uid"]
    _wait(lambda: {"GuestFrozen", "GuestThawed"} <= _reasons(k, ns, uid), 60,
          "the snapshot's GuestFrozen and GuestThawed events", lambda: _reasons(k, ns, uid))  # fmt: skip
    content = _get(k, ns, "vmsnapshotcontent", status["virtualMachineSnapshotContentName"])
    (backup,) = content["spec"]["volumeBackups"]
    vs = _get(k, ns, "volumesnapshot", backup["volumeSnapshotName"])
    assert vs["status"]["readyToUse"] is True, vs.get("status")
    _wait(lambda: "fsFreezeStatus" not in _get(k, ns, "vmi", "src")["status"], 60,
          "the guest thawed (status.fsFreezeStatus gone)")  # fmt: skip
    return backup  # type: ignore[no-any-return]


def _in_guest(kubeconfig: Path, ns: str, key: Path, command: str) -> str:
    """Run `command` in src's guest over virtctl-py ssh; what it printed."""
    opts = ["-i", str(key), "-t", "-o StrictHostKeyChecking=no",
            "-t", "-o UserKnownHostsFile=/dev/null"]  # fmt: skip
    done = subprocess.run(
        virtctl_py(kubeconfig, ns, "ssh", "root@vmi/src", *opts, "-c", command),
        capture_output=True, text=True, timeout=180, cwd=REPO, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"ssh {command!r}: {done.returncode} {done.stderr}"
    return done.stdout


def _names(k: Kubectl, ns: str, kind: str) -> set[str]:
    return set(k("get", kind, "-n", ns, "-o", "jsonpath={.items[*].metadata.name}").split())


def _freeze_unanswered(k: Kubectl, cluster: Cluster, ns: str, key: Path) -> None:
    """src's agent stopped (SIGSTOP): the snapshot's freeze goes unanswered, the snapshot
    fails with the reason (FreezeFailed) and makes no VolumeSnapshot; the agent resumed,
    the freeze it then answers is undone at once by the launcher (the thaw came first), the
    guest writes and status.fsFreezeStatus is unset."""
    vmi = _get(k, ns, "vmi", "src")
    _wait(lambda: "KUBEVIRT-PY-SERVICES-UP" in _serial(cluster, vmi), 180,
          "the guest's ssh server", lambda: _serial(cluster, vmi)[-400:])  # fmt: skip
    _in_guest(cluster.kubeconfig, ns, key, "kill -STOP $(pidof qemu-ga)")
    before = _names(k, ns, "volumesnapshot")
    spec = {"source": {**VM_REF, "name": "src"}, "failureDeadline": "15s"}
    _apply(k, ns, _obj("VirtualMachineSnapshot", "stuck", spec))
    snap = _until(k, ns, "vmsnapshot", "stuck", lambda s: s.get("phase") in ("Succeeded", "Failed"),
                  "snapshot stuck final")  # fmt: skip
    status = snap["status"]
    assert status["phase"] == "Failed", status
    assert "freezing the guest's filesystems" in status["error"]["message"], status
    uid = snap["metadata"]["uid"]
    _wait(lambda: "FreezeFailed" in _reasons(k, ns, uid), 60, "the FreezeFailed event")
    assert _names(k, ns, "volumesnapshot") == before
    wrote = _in_guest(cluster.kubeconfig, ns, key,
                      "kill -CONT $(pidof qemu-ga); echo written >/tmp/after; cat /tmp/after")  # fmt: skip
    assert "written" in wrote, wrote
    # The agent, resumed, answers the freeze libvirt had sent: the launcher, asked to thaw
    # meanwhile, undoes it at once (not 30 s later by its unfreeze timer).
    pods = json.loads(k("get", "pod", "-n", ns, "-l",
                        f"kubevirt.io/created-by={vmi['metadata']['uid']}", "-o", "json"))  # fmt: skip
    (pod,) = pods["items"]

    def launcher_log() -> str:
        return str(k("logs", "-n", ns, pod["metadata"]["name"], "-c", "compute"))

    _wait(lambda: "late_freeze_undone" in launcher_log(), 60, "the late freeze undone",
          lambda: launcher_log()[-800:])  # fmt: skip
    assert "unfreeze_timeout_passed" not in launcher_log()
    _wait(lambda: "fsFreezeStatus" not in _get(k, ns, "vmi", "src")["status"], 60,
          "the guest thawed (status.fsFreezeStatus gone)")  # fmt: skip


def _restart_midway(k: Kubectl, ns: str) -> None:
    """A snapshot (online, of src), a restore (snap-a into copy2), a clone (src into twin2)
    and an export (of snap-a) are started, then the leading controller is deleted: each
    converges under the new leader, and all that is left is what they made (one
    VolumeSnapshot, the new VMs' claims, the export's claim and pod), src thawed."""
    before = {kind: _names(k, ns, kind) for kind in ("volumesnapshot", "pvc", "pod")}
    halted = '{"op": "replace", "path": "/spec/runStrategy", "value": "Halted"}'
    _apply(k, ns, _obj("VirtualMachineSnapshot", "mid", {"source": {**VM_REF, "name": "src"}}))
    restore = {"target": {**VM_REF, "name": "copy2"}, "virtualMachineSnapshotName": "snap-a",
               "patches": [halted]}  # fmt: skip
    _apply(k, ns, _obj("VirtualMachineRestore", "mid-restore", restore))
    clone = {"source": {**VM_REF, "name": "src"}, "target": {**VM_REF, "name": "twin2"},
             "patches": [halted]}  # fmt: skip
    _apply(k, ns, _obj("VirtualMachineClone", "twin2", clone, api="clone.kubevirt.io/v1beta1"))
    export = {"source": {"apiGroup": "snapshot.kubevirt.io", "kind": "VirtualMachineSnapshot",
                         "name": "snap-a"}}  # fmt: skip
    _apply(k, ns, _obj("VirtualMachineExport", "mid-exp", export, api="export.kubevirt.io/v1beta1"))
    leader = leader_pod(k)
    k("delete", "pod", "-n", "kubevirt", leader, "--wait=false")

    snap = _until(k, ns, "vmsnapshot", "mid", lambda s: s.get("phase") == "Succeeded",
                  "snapshot mid Succeeded")  # fmt: skip
    _until(k, ns, "vmrestore", "mid-restore", lambda s: s.get("complete"), "restore complete")
    _until(k, ns, "vmclone", "twin2", lambda s: s.get("phase") == "Succeeded", "clone Succeeded")
    _until(k, ns, "vmexport", "mid-exp", lambda s: s.get("phase") == "Ready", "export Ready")
    assert leader_pod(k) != leader

    made_claims = {
        v["persistentVolumeClaim"]["claimName"]
        for vm in ("copy2", "twin2")
        for v in _get(k, ns, "vm", vm)["spec"]["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    } | {"mid-exp-src-data"}
    uid = snap["metadata"]["uid"]
    added = {"volumesnapshot": {f"vmsnapshot-{uid}-volume-data"}, "pvc": made_claims,
             "pod": {"virt-export-mid-exp"}}  # fmt: skip

    def new() -> dict[str, set[str]]:
        return {kind: _names(k, ns, kind) - before[kind] for kind in added}

    _wait(lambda: new() == added, 120, "nothing new but what the four made", new)
    left = k("get", "vmsnapshot,vmrestore", "-n", ns, "-o", "name").split()
    assert not [n for n in left if "tmp-" in n], left
    assert "fsFreezeStatus" not in _get(k, ns, "vmi", "src")["status"]


def test_snapshot_restore_and_clone_story(
    kv_restored: Kubectl, real_cluster: Cluster, real_namespace: str, ssh_key: tuple[Path, str]
) -> None:
    """A running VM on a CSI claim (counter 1 = A) snapshotted online: the guest frozen
    through its agent and thawed, Succeeded, readyToUse, indications Online+GuestAgent, its
    VolumeSnapshot readyToUse. Restarted (counter 2 = B), stopped, restored in place and
    started: the guest finds A (1), not B. A restore into a new VM (patched to Halted)
    makes it on a new claim from the VolumeSnapshot, owned by it. A clone boots with the
    new MAC on its own claim; its temporary snapshot and restore are gone. Bad input is
    refused at admission naming the field: a snapshot of a missing VM, a restore of a
    missing snapshot, a restore onto the running VM without a policy. Backups ride on the
    running VM before its restart (backup_story.py): refused without changed block
    tracking, then full + incremental through a tracker, restored byte for byte into a
    claim that, hot-plugged into the VM, gives the guest its disk's bytes back."""
    k, ns, cluster = kv_restored, real_namespace, real_cluster
    _apply(k, ns, _claim("src-data"))
    _apply(k, ns, _vm("src", "src-data", ssh_key[1]))
    vmi, line = _boot(k, cluster, ns, "src")
    assert "found=0 wrote=1" in line, line
    _wait(lambda: _condition(_get(k, ns, "vmi", "src"), "AgentConnected") == "True",
          120, "the guest agent connected")  # fmt: skip

    backup = _online_snapshot(k, ns, "snap-a")
    _freeze_unanswered(k, cluster, ns, ssh_key[0])
    backup_story(k, ns, lambda command: _in_guest(cluster.kubeconfig, ns, ssh_key[0], command))

    # B: the next boot bumps the counter; then stopped.
    assert _virtctl(cluster.kubeconfig, ns, "restart", "src").returncode == 0
    vmi, line = _boot(k, cluster, ns, "src", not_uid=vmi["metadata"]["uid"])
    assert "found=1 wrote=2" in line, line
    assert "spec.targetReadinessPolicy" in _refused(
        k, ns, _obj("VirtualMachineRestore", "bad", {"target": {**VM_REF, "name": "src"},
                                                     "virtualMachineSnapshotName": "snap-a"}),
    )  # fmt: skip
    assert _virtctl(cluster.kubeconfig, ns, "stop", "src").returncode == 0
    _wait(lambda: not _get(k, ns, "vmi", "src"), 120, "src's VMI gone")

    # In place: A back, B gone.
    restore = {"target": {**VM_REF, "name": "src"}, "virtualMachineSnapshotName": "snap-a"}
    _apply(k, ns, _obj("VirtualMachineRestore", "back-to-a", restore))
    done = _until(k, ns, "vmrestore", "back-to-a", lambda s: s.get("complete"), "restore complete")
    (restored,) = done["status"]["restores"]
    assert _virtctl(cluster.kubeconfig, ns, "start", "src").returncode == 0
    vmi, line = _boot(k, cluster, ns, "src", not_uid=vmi["metadata"]["uid"])
    assert "found=1 wrote=2" in line, line  # A (1) is back; B (2) would read found=2
    claim = _get(k, ns, "pvc", restored["persistentVolumeClaim"])
    assert claim["spec"]["dataSource"]["name"] == backup["volumeSnapshotName"]

    # Into a new VM, patched to stay stopped.
    halted = '{"op": "replace", "path": "/spec/runStrategy", "value": "Halted"}'
    new = {**restore, "target": {**VM_REF, "name": "copy"}, "patches": [halted]}
    _apply(k, ns, _obj("VirtualMachineRestore", "to-copy", new))
    done = _until(k, ns, "vmrestore", "to-copy", lambda s: s.get("complete"), "restore to copy")
    copy = _get(k, ns, "vm", "copy")
    assert copy["spec"]["runStrategy"] == "Halted"
    (restored,) = done["status"]["restores"]
    claim = _get(k, ns, "pvc", restored["persistentVolumeClaim"])
    assert claim["metadata"]["ownerReferences"][0]["uid"] == copy["metadata"]["uid"]
    volumes = copy["spec"]["template"]["spec"]["volumes"]
    assert volumes[0]["persistentVolumeClaim"]["claimName"] == restored["persistentVolumeClaim"]

    # A clone: its own claim and a new MAC; the temporaries gone.
    clone = {"source": {**VM_REF, "name": "src"}, "target": {**VM_REF, "name": "twin"},
             "newMacAddresses": {"default": MAC_CLONE}}  # fmt: skip
    _apply(k, ns, _obj("VirtualMachineClone", "twin", clone, api="clone.kubevirt.io/v1beta1"))
    _until(k, ns, "vmclone", "twin", lambda s: s.get("phase") == "Succeeded", "clone Succeeded")
    twin_vmi, line = _boot(k, cluster, ns, "twin")
    assert "found=2 wrote=3" in line, line  # src's disk as it was at the clone's snapshot
    (iface,) = twin_vmi["spec"]["domain"]["devices"]["interfaces"]
    assert iface["macAddress"] == MAC_CLONE
    twin_claim = _get(k, ns, "vm", "twin")["spec"]["template"]["spec"]["volumes"][0]
    assert twin_claim["persistentVolumeClaim"]["claimName"] != "src-data"
    left = k("get", "vmsnapshot,vmrestore", "-n", ns, "-o", "name").split()
    assert not [n for n in left if "tmp-" in n], left

    # Bad input, refused at admission.
    missing = _obj("VirtualMachineSnapshot", "nope", {"source": {**VM_REF, "name": "ghost"}})
    assert "spec.source.name" in _refused(k, ns, missing)
    ghost = {"target": {**VM_REF, "name": "copy"}, "virtualMachineSnapshotName": "ghost"}
    assert "spec.virtualMachineSnapshotName" in _refused(
        k, ns, _obj("VirtualMachineRestore", "nope", ghost)
    )

    _restart_midway(k, ns)
