"""Online VirtualMachineSnapshots on real nodes (a private 2-node kubelet + containerd
cluster, kubevirt-py deployed from manifests, the test bed's CSI stack). Printed, over
`--rounds` rounds, median and max:

(a) the guest's frozen time: freeze → VolumeSnapshot created → thaw, as the controller
    reports it in the snapshot's GuestThawed event (target ≤ 1 s);
(b) VirtualMachineSnapshot create → readyToUse beside a bare CSI VolumeSnapshot of the same
    claim create → readyToUse, and the ratio (target ≤ 1.2x);
(c) where a VirtualMachineSnapshot's time goes, from the leading controller's JSON log
    (median, from `kubectl apply`): its content made, the guest frozen, the VolumeSnapshot
    made, the guest thawed, readyToUse written.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench_cluster import real_cluster

from localkube.deploy import Kubectl

NAMESPACE = "bench-snapshot"
GUEST_IMAGE = "registry.local/kubevirt-py/tiny-guest:v1"
TIMEOUT = 300.0
THAWED = re.compile(r"after ([0-9.]+)s")


def wait(probe: Callable[[], Any], what: str, interval: float = 0.05) -> Any:
    """Poll `probe` every `interval` until it answers (TIMEOUT at most)."""
    for _ in range(int(TIMEOUT / interval)):
        if seen := probe():
            return seen
        time.sleep(interval)
    raise SystemExit(f"timed out waiting for {what}")


def get(k: Kubectl, kind: str, name: str) -> dict[str, Any]:
    """The object in the bench's namespace ({} when missing)."""
    found: dict[str, Any] = json.loads(
        k("get", kind, name, "-n", NAMESPACE, "-o", "json", check=False) or "{}"
    )
    return found


def apply(k: Kubectl, obj: dict[str, Any]) -> None:
    k("apply", "-n", NAMESPACE, "-f", "-", stdin=json.dumps(obj))


def guest(k: Kubectl) -> None:
    """A claim on csi-local and the tiny guest on it, Running with its agent connected."""
    apply(k, {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "csi-local",
                 "resources": {"requests": {"storage": "64Mi"}}},
    })  # fmt: skip
    boot = {"image": GUEST_IMAGE, "kernelPath": "/boot/vmlinuz", "initrdPath": "/boot/initrd.img"}
    apply(k, {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "vm"},
        "spec": {"runStrategy": "Always", "template": {"spec": {
            "domain": {
                "devices": {"disks": [{"name": "data", "disk": {"bus": "virtio"}}]},
                "firmware": {"kernelBoot": {"container": boot,
                                            "kernelArgs": "console=ttyS0 panic=-1 quiet"}},
                "resources": {"requests": {"memory": "128Mi"}},
            },
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        }}},
    })  # fmt: skip

    def agent() -> bool:
        conds = get(k, "vmi", "vm").get("status", {}).get("conditions", [])
        return any(c["type"] == "AgentConnected" and c["status"] == "True" for c in conds)

    wait(agent, "the VM Running with its guest agent", interval=1.0)


def vm_snapshot(k: Kubectl, name: str, wall: dict[str, float]) -> tuple[float, float]:
    """create → readyToUse (s), and the frozen time from the GuestThawed event; the wall
    clock time of the apply goes into `wall`."""
    wall[name] = time.time()
    began = time.monotonic()
    apply(k, {"apiVersion": "snapshot.kubevirt.io/v1beta1", "kind": "VirtualMachineSnapshot",
              "metadata": {"name": name},
              "spec": {"source": {"apiGroup": "kubevirt.io", "kind": "VirtualMachine",
                                  "name": "vm"}}})  # fmt: skip

    def ready() -> dict[str, Any] | None:
        snap = get(k, "vmsnapshot", name)
        status = snap.get("status", {})
        if status.get("phase") == "Failed":
            raise SystemExit(f"snapshot {name} failed: {status}")
        return snap if status.get("readyToUse") else None

    snap = wait(ready, f"snapshot {name} readyToUse")
    took = time.monotonic() - began
    uid = snap["metadata"]["uid"]

    def frozen() -> float | None:
        out = k("get", "events", "-n", NAMESPACE, "--field-selector",
                f"involvedObject.uid={uid},reason=GuestThawed", "-o", "json")  # fmt: skip
        for event in json.loads(out)["items"]:
            m = THAWED.search(event.get("message", ""))
            if m:
                return float(m.group(1))
        return None

    return took, wait(frozen, "the GuestThawed event", interval=0.5)


def bare_snapshot(k: Kubectl, name: str) -> float:
    began = time.monotonic()
    apply(k, {"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
              "metadata": {"name": name},
              "spec": {"source": {"persistentVolumeClaimName": "data"},
                       "volumeSnapshotClassName": "csi-local-snapshots"}})  # fmt: skip
    wait(lambda: get(k, "volumesnapshot", name).get("status", {}).get("readyToUse"),
         f"VolumeSnapshot {name} readyToUse")  # fmt: skip
    return time.monotonic() - began


# (c): the controller log events of one snapshot, in order.
STEPS = (
    ("content", "snapshot_object_created", "VirtualMachineSnapshotContent"),
    ("frozen", "guest_frozen", None),
    ("volumesnapshot", "snapshot_object_created", "VolumeSnapshot"),
    ("thawed", "guest_thawed", None),
    ("ready", "vmsnapshot_phase", "Succeeded"),
)


def breakdown(k: Kubectl, began: dict[str, float]) -> str:
    """Median seconds from each snapshot's apply to each step, from the leader's log."""
    lease = json.loads(k("get", "lease", "virt-controller-py", "-n", "kubevirt", "-o", "json"))
    log = k("logs", "-n", "kubevirt", lease["spec"]["holderIdentity"], "-c", "virt-controller")
    seen: dict[str, dict[str, float]] = {}
    for line in log.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        name = str(rec.get("vmsnapshot", "")).partition("/")[2]
        if name not in began:
            continue
        for step, event, detail in STEPS:
            if rec.get("event") == event and detail in (None, rec.get("kind"), rec.get("phase")):
                at = datetime.fromisoformat(rec["timestamp"].replace("Z", "+00:00")).timestamp()
                seen.setdefault(name, {}).setdefault(step, at - began[name])
    parts = []
    for step, _, _ in STEPS:
        times = [steps[step] for steps in seen.values() if step in steps]
        parts.append(f"{step} {statistics.median(times):.3f}" if times else f"{step} -")
    return "(c) from apply (median s): " + ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="snapshots of each kind")
    parser.add_argument("--session", type=int, help="test session PID's real-node cluster")
    args = parser.parse_args()
    frozen, ours, bare = [], [], []
    wall: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kvpy-bench-snapshot-") as tmp:
        cluster = real_cluster(args.session, certs=Path(tmp) / "certs")
        with cluster as (_, k):
            k("create", "namespace", NAMESPACE)
            try:
                guest(k)
                for i in range(args.rounds):
                    took, froze = vm_snapshot(k, f"snap-{i}", wall)
                    ours.append(took)
                    frozen.append(froze)
                    bare.append(bare_snapshot(k, f"bare-{i}"))
                steps = breakdown(k, wall)
            finally:  # on a test session's cluster, nothing of ours stays
                k("delete", "namespace", NAMESPACE, "--wait=false", check=False)
    med = statistics.median
    print(f"(a) guest frozen during an online snapshot: median {med(frozen):.3f} s, "
          f"max {max(frozen):.3f} s (target <= 1 s)")  # fmt: skip
    print(f"(b) create -> readyToUse: VirtualMachineSnapshot median {med(ours):.2f} s "
          f"(max {max(ours):.2f}), bare VolumeSnapshot median {med(bare):.2f} s "
          f"(max {max(bare):.2f}); ratio {med(ours) / med(bare):.2f}x (target <= 1.2x)")  # fmt: skip
    print(steps)


if __name__ == "__main__":
    main()
