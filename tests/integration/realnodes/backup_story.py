"""Backups on real nodes, told on the snapshot story's running VM (test_snapshots.py's
`src`: a claim-backed vda, cloud-init, and the `scratch` emptyDisk, a qcow2 in the
launcher, on vdc), so they add no boot of their own.

Changed block tracking off: a backup ends Done with ChangedBlockTrackingNotEnabled. On
(the IncrementalBackup gate and a VM label selector in the KubeVirt CR): through a
tracker, a full backup, the guest writes N MiB, an incremental backup of about N MiB for
the qcow2 disk; a pod of the launcher image restores full + incremental with the
documented script (shared/backuprestore.py) into the target claim's disk.img, and that
claim, hot-plugged into the VM, shows the guest the very bytes of its disk."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from localkube.deploy import Kubectl
from shared import podlayout
from shared.backuprestore import restore_script
from tests.integration.realnodes.test_storage import _apply, _get
from tests.integration.realnodes.test_storage import _claim as _storage_claim
from tests.integration.realnodes.test_story import _virtctl, _wait

API = "backup.kubevirt.io/v1alpha1"
MIB = 1 << 20
WRITTEN_MIB = 8  # the guest's writes between the full and the incremental backup
VOLUME = "scratch"
SCRATCH_DEV = "/dev/vdc"
Guest = Callable[[str], str]


def scratch_disk() -> tuple[dict[str, Any], dict[str, Any]]:
    """The emptyDisk the backups track (disk, volume): qcow2 in the launcher."""
    return (
        {"name": VOLUME, "disk": {"bus": "virtio"}},
        {"name": VOLUME, "emptyDisk": {"capacity": "64Mi"}},
    )


def _backup(name: str, source: dict[str, str]) -> dict[str, Any]:
    spec = {"source": source, "pvcName": "bk-target"}
    return {"apiVersion": API, "kind": "VirtualMachineBackup", "metadata": {"name": name},
            "spec": spec}  # fmt: skip


def _done(k: Kubectl, ns: str, name: str) -> dict[str, Any]:
    """The backup once Done=True; its status."""

    def probe() -> dict[str, Any] | None:
        status = _get(k, ns, "vmbackup", name).get("status") or {}
        conds = {c["type"]: c for c in status.get("conditions") or ()}
        return status if conds.get("Done", {}).get("status") == "True" else None

    found: dict[str, Any] = _wait(probe, 180, f"backup {name} Done",
                                  lambda: _get(k, ns, "vmbackup", name).get("status"))  # fmt: skip
    return found


def _done_reason(status: dict[str, Any]) -> tuple[str, str]:
    (done,) = [c for c in status["conditions"] if c["type"] == "Done"]
    return done["reason"], done.get("message", "")


def _enable_cbt(k: Kubectl) -> None:
    kv = json.loads(k("get", "kv", "kubevirt", "-n", "kubevirt", "-o", "json"))
    dev = kv["spec"].get("configuration", {}).get("developerConfiguration", {})
    gates = [*dev.get("featureGates", []), "IncrementalBackup"]
    body = {"spec": {"configuration": {
        "developerConfiguration": {"featureGates": gates},
        "changedBlockTrackingLabelSelectors": {
            "virtualMachineLabelSelector": {"matchLabels": {"app": "snap-story"}}},
    }}}  # fmt: skip
    k("patch", "kv", "kubevirt", "-n", "kubevirt", "--type=merge", "-p", json.dumps(body))


def _write(guest: Guest, *, seek_mib: int, mib: int) -> None:
    out = guest(f"dd if=/dev/urandom of={SCRATCH_DEV} bs=1M seek={seek_mib} count={mib} "
                "conv=fsync 2>&1; echo WROTE")  # fmt: skip
    assert "WROTE" in out, out


def _restore_pod(k: Kubectl, ns: str, image: str, backups: list[str]) -> str:
    """A pod of the launcher image restoring the chain on the target claim; its log:
    the sizes of the backups' files, then the restored image's sha256."""
    base = "/b"
    # the restored image is the claim's disk.img: the claim is then a VM's disk as it is
    script = restore_script([f"{base}/{b}" for b in backups], volume=VOLUME,
                            work_dir=f"{base}/restore", output=f"{base}/disk.img")  # fmt: skip
    files = " ".join(f"{base}/{b}/{VOLUME}.qcow2" for b in backups)
    script += f"stat -c 'SIZE %n %s' {files}\nsha256sum {base}/disk.img\n"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bk-restore"},
           "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "restore", "image": image,
                                    "imagePullPolicy": "IfNotPresent",
                                    "command": [podlayout.LAUNCHER_BUSYBOX, "sh", "-c", script],
                                    "securityContext": {"runAsUser": 107, "runAsGroup": 107},
                                    "volumeMounts": [{"name": "b", "mountPath": base}]}],
                    "volumes": [{"name": "b",
                                 "persistentVolumeClaim": {"claimName": "bk-target"}}]}}  # fmt: skip
    _apply(k, ns, pod)
    _wait(lambda: _get(k, ns, "pod", "bk-restore").get("status", {}).get("phase")
          in ("Succeeded", "Failed"), 180, "the restore pod finished",
          lambda: _get(k, ns, "pod", "bk-restore").get("status"))  # fmt: skip
    log = str(k("logs", "-n", ns, "bk-restore"))
    assert _get(k, ns, "pod", "bk-restore")["status"]["phase"] == "Succeeded", log
    return log


def backup_story(k: Kubectl, ns: str, guest: Guest) -> None:
    """Refused without CBT; with it, full then incremental (≈ N MiB) through a tracker,
    the tracker's checkpoint recorded; full + incremental restored byte for byte into a
    claim the VM then reads them from."""
    vm_ref = {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "src"}
    tracker_ref = {"apiGroup": "backup.kubevirt.io", "kind": "VirtualMachineBackupTracker",
                   "name": "bk-tracker"}  # fmt: skip
    claim = _storage_claim("bk-target")
    claim["spec"]["storageClassName"] = "csi-local"
    _apply(k, ns, claim)
    _apply(k, ns, _backup("bk-nocbt", vm_ref))
    reason, message = _done_reason(_done(k, ns, "bk-nocbt"))
    assert reason == "ChangedBlockTrackingNotEnabled" and "IncrementalBackup" in message, message

    _enable_cbt(k)
    _write(guest, seek_mib=1, mib=16)
    _apply(k, ns, {"apiVersion": API, "kind": "VirtualMachineBackupTracker",
                   "metadata": {"name": "bk-tracker"}, "spec": {"source": vm_ref}})  # fmt: skip
    _apply(k, ns, _backup("bk-full", tracker_ref))
    full = _done(k, ns, "bk-full")
    assert _done_reason(full)[0] == "Completed", full
    assert full["type"] == "Full", full
    tracker = _get(k, ns, "vmbackuptracker", "bk-tracker")["status"]
    assert tracker["latestCheckpoint"]["name"] == full["checkpointName"], tracker

    _write(guest, seek_mib=32, mib=WRITTEN_MIB)
    _apply(k, ns, _backup("bk-inc", tracker_ref))
    inc = _done(k, ns, "bk-inc")
    assert _done_reason(inc)[0] == "Completed" and inc["type"] == "Incremental", inc
    assert {"volumeName": VOLUME, "diskTarget": "vdc"} in inc["includedVolumes"], inc
    tracker = _get(k, ns, "vmbackuptracker", "bk-tracker")["status"]
    assert tracker["latestCheckpoint"]["name"] == inc["checkpointName"], tracker
    target_pod = f"backup-target-{_get(k, ns, 'vmbackup', 'bk-inc')['metadata']['uid']}"
    _wait(lambda: not _get(k, ns, "pod", target_pod), 60, "the target pod deleted")

    in_guest = guest(f"sha256sum {SCRATCH_DEV}")
    vmi = _get(k, ns, "vmi", "src")
    pods = json.loads(k("get", "pod", "-n", ns, "-l",
                        f"kubevirt.io/created-by={vmi['metadata']['uid']}", "-o", "json"))  # fmt: skip
    (launcher,) = pods["items"]
    image = next(c["image"] for c in launcher["spec"]["containers"] if c["name"] == "compute")
    log = _restore_pod(k, ns, image, ["bk-full", "bk-inc"])
    found = re.finditer(r"^SIZE /b/([\w-]+)/\S+ (\d+)$", log, re.M)
    sizes = {m.group(1): int(m.group(2)) for m in found}
    assert WRITTEN_MIB * MIB <= sizes["bk-inc"] < sizes["bk-full"], sizes
    restored = re.search(r"^([0-9a-f]{64})\s+/b/disk.img$", log, re.M)
    guest_sum = re.search(r"([0-9a-f]{64})", in_guest)
    assert restored and guest_sum and restored.group(1) == guest_sum.group(1), (log, in_guest)
    _restored_disk_in_the_guest(k, ns, guest)


def _restored_disk_in_the_guest(k: Kubectl, ns: str, guest: Guest) -> None:
    """The restored claim hot-plugged into the running VM: the guest reads the backed-up
    disk's bytes from it. Compared past the first MiB: the test guest writes its disk
    counter into the first bytes of every disk it sees arrive (scripts/guest/init)."""
    added = _virtctl(k.kubeconfig, ns, "addvolume", "src", "--volume-name=bk-target")
    assert added.returncode == 0, added.stderr

    def ready() -> str | None:
        states = _get(k, ns, "vmi", "src").get("status", {}).get("volumeStatus", [])
        state: dict[str, Any] = next((v for v in states if v.get("name") == "bk-target"), {})
        return str(state["target"]) if state.get("phase") == "Ready" else None

    target = _wait(ready, 180, "the restored claim hot-plugged into src")
    past_counter = "bs=1M skip=1 count=63 2>/dev/null | sha256sum"
    want = guest(f"dd if={SCRATCH_DEV} {past_counter}").split()[0]
    seen = guest(f"dd if=/dev/{target} {past_counter}")
    assert re.fullmatch(r"[0-9a-f]{64}", want) and want in seen, (want, seen)
