"""The VirtualMachineBackup controller over a fake API: a VM without changed block tracking
(no gate, no matching selector) is refused naming the reason; a stopped VM and a missing
target claim or tracker too; otherwise the target pod is made on the VMI's node, the backup
started once it runs (Initializing → Progressing, its type and checkpoint recorded), its
job followed to Done, the tracker's latestCheckpoint set, and the next backup through the
tracker asks for an incremental one from that checkpoint; a fallback to full says why."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

import pytest

from controller.backup.controller import BackupController, TargetImage
from controller.informers import build_informers
from shared.clusterconfig import ClusterConfig
from shared.kube import (
    PODS,
    PVCS,
    KubeClient,
    NotFound,
    QueueConfig,
    Registry,
    Resource,
    StatusWriter,
    WorkQueue,
)
from shared.kube.resources import VMBACKUPS, VMBACKUPTRACKERS
from shared.model import VirtualMachine, VMIPhase
from shared.model.backup import VirtualMachineBackup
from shared.model.kubevirt import KubeVirt
from tests.unit.controller import builders
from tests.unit.shared.kube.fakes import FakeApi

GATED = ClusterConfig(feature_gates=frozenset({"IncrementalBackup"}))
SELECTOR = {"virtualMachineLabelSelector": {"matchLabels": {"backup": "cbt"}}}
VM_REF = {"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "vm1"}
TRACKER_REF = {"apiGroup": "backup.kubevirt.io", "kind": "VirtualMachineBackupTracker", "name": "t"}
POD = "backup-target-b-uid"


class BackupApi(FakeApi):
    """FakeApi plus deletes, and the backup subresource answering `replies` in turn."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[dict[str, Any]] = []
        self.replies: list[dict[str, Any]] = []

    async def call_subresource(
        self, method: str, resource: Resource, name: str, *, subresource: str, **kw: Any
    ) -> dict[str, Any]:
        self.requests.append(dict(kw.get("body") or {}))
        return self.replies.pop(0)

    async def delete(
        self, resource: Resource, name: str, *, namespace: str | None = None, **_: Any
    ) -> dict[str, Any]:
        if self.objects.pop(self._key(resource, name, namespace), None) is None:
            raise NotFound(404, "NotFound", f"{name} not found")
        return {}


def reply(state: str, *, incremental: bool = False, full_reason: str = "") -> dict[str, Any]:
    return {
        "state": state,
        "checkpoint": "t-20260101000000",
        "volumes": [
            {
                "volume": "scratch",
                "target": "vdb",
                "file": "scratch.qcow2",
                "incremental": incremental,
            }
        ],
        "message": "disk full" if state == "Failed" else "",
        "fullReason": full_reason,
    }


def rig(
    *,
    cluster: ClusterConfig = GATED,
    selectors: Mapping[str, Any] | None = SELECTOR,
    labels: Mapping[str, str] | None = None,
    running: bool = True,
    claim: bool = True,
    source: Mapping[str, str] = VM_REF,
    tracker: Mapping[str, Any] | None = None,
    force_full: bool = False,
) -> tuple[BackupApi, BackupController, Callable[[], VirtualMachineBackup]]:
    api = BackupApi()
    client = cast(KubeClient, api)
    registry = Registry()
    informers = build_informers(client)
    ctl = BackupController(
        builders.deps(client, informers, registry=registry),
        queue=WorkQueue(QueueConfig(name="vmbackup"), registry=registry),
        writer=StatusWriter(client, VMBACKUPS, model=VirtualMachineBackup, registry=registry),
        target=TargetImage(image="launcher:v1"),
        cluster=lambda: cluster,
    )
    kv = KubeVirt.from_dict(
        {"metadata": {"name": "kubevirt", "namespace": "kubevirt"},
         "spec": {"configuration": {"changedBlockTrackingLabelSelectors": selectors} if selectors else {}}}
    )  # fmt: skip
    informers.kubevirts.store.upsert(kv.key, kv)
    raw = builders.make_vm().to_dict()
    raw["metadata"]["labels"] = dict(labels if labels is not None else {"backup": "cbt"})
    vm = VirtualMachine.from_dict(raw)
    informers.vms.store.upsert(vm.key, vm)
    if running:
        vmi = builders.make_vmi(phase=VMIPhase.RUNNING, node="node01")
        informers.vmis.store.upsert(vmi.key, vmi)
    if claim:
        api.seed(PVCS, {"metadata": {"name": "target", "namespace": "ns"}})
    if tracker is not None:
        api.seed(
            VMBACKUPTRACKERS,
            {"metadata": {"name": "t", "namespace": "ns"}, "spec": {"source": VM_REF}, **tracker},
        )
    spec: dict[str, Any] = {"source": dict(source), "pvcName": "target"}
    if force_full:
        spec["forceFullBackup"] = True
    api.seed(
        VMBACKUPS,
        {"apiVersion": "backup.kubevirt.io/v1alpha1", "kind": "VirtualMachineBackup",
         "metadata": {"name": "b", "namespace": "ns", "uid": "b-uid"}, "spec": spec},
    )  # fmt: skip

    def current() -> VirtualMachineBackup:
        backup = VirtualMachineBackup.from_dict(api.stored(VMBACKUPS, "ns/b"))
        informers.backups.store.upsert(backup.key, backup)
        return backup

    current()
    return api, ctl, current


def conditions(backup: VirtualMachineBackup) -> dict[str, tuple[str | None, str | None]]:
    return {str(c.type): (c.status, c.reason) for c in backup.status.conditions}


@pytest.mark.parametrize(
    ("options", "reason", "words"),
    [
        pytest.param(
            {"cluster": ClusterConfig()},
            "ChangedBlockTrackingNotEnabled",
            "IncrementalBackup",
            id="no-gate",
        ),
        pytest.param(
            {"selectors": None},
            "ChangedBlockTrackingNotEnabled",
            "changedBlockTrackingLabelSelectors",
            id="no-selectors",
        ),
        pytest.param(
            {"labels": {}},
            "ChangedBlockTrackingNotEnabled",
            "not enabled for this VM",
            id="not-selected",
        ),
        pytest.param({"running": False}, "VirtualMachineNotRunning", "not running", id="stopped"),
        pytest.param({"claim": False}, "TargetClaimNotFound", "target", id="no-claim"),
        pytest.param(
            {"source": TRACKER_REF},
            "SourceNotFound",
            "VirtualMachineBackupTracker t",
            id="no-tracker",
        ),
    ],
)
async def test_refusals_end_done_naming_the_reason(
    options: dict[str, Any], reason: str, words: str
) -> None:
    """Each refusal: Done=True with its reason and a message naming it; nothing is asked of
    the VM and no target pod is made."""
    api, ctl, current = rig(**options)
    await ctl.sync("ns/b")
    backup = current()
    assert conditions(backup)["Done"] == ("True", reason)
    cond = backup.status.condition("Done")  # type: ignore[arg-type]
    assert cond is not None and words in (cond.message or "")
    assert api.requests == [] and ("pods", "ns/" + POD) not in api.objects


async def test_full_backup_through_its_phases() -> None:
    """Target pod made on the VMI's node → Initializing until it runs → Start (checkpoint,
    no base) → Progressing with type Full → Status Completed → Done, the pod deleted."""
    api, ctl, current = rig()
    await ctl.sync("ns/b")
    pod = api.stored(PODS, f"ns/{POD}")
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node01"]
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "target"
    assert conditions(current())["Initializing"] == ("True", "WaitingForTarget")
    pod["status"] = {"phase": "Running"}
    api.replies = [reply("Running")]
    await ctl.sync("ns/b")
    (start,) = api.requests
    assert start["cmd"] == "Start" and start["targetPod"] == POD and "incremental" not in start
    backup = current()
    assert conditions(backup)["Progressing"] == ("True", "BackupInProgress")
    assert backup.status.type == "Full" and backup.status.checkpoint_name == "t-20260101000000"
    api.replies = [reply("Running")]
    await ctl.sync("ns/b")
    assert "Done" not in conditions(current())
    api.replies = [reply("Completed")]
    await ctl.sync("ns/b")
    backup = current()
    assert conditions(backup)["Done"] == ("True", "Completed")
    assert conditions(backup)["Progressing"][0] == "False"
    assert (PODS.plural, f"ns/{POD}") not in api.objects


async def test_tracker_records_the_checkpoint_and_bases_the_next_backup() -> None:
    """Through a tracker with a latest checkpoint: Start asks for an incremental backup from
    it; once completed, the tracker's latestCheckpoint is the new one."""
    latest = {"status": {"latestCheckpoint": {"name": "t-1"}}}
    api, ctl, current = rig(source=TRACKER_REF, tracker=latest)
    await ctl.sync("ns/b")
    api.stored(PODS, f"ns/{POD}")["status"] = {"phase": "Running"}
    api.replies = [reply("Running", incremental=True), reply("Completed", incremental=True)]
    await ctl.sync("ns/b")
    assert api.requests[0]["incremental"] == "t-1"
    assert current().status.type == "Incremental"
    await ctl.sync("ns/b")
    tracker = api.stored(VMBACKUPTRACKERS, "ns/t")
    assert tracker["status"]["latestCheckpoint"]["name"] == "t-20260101000000"
    assert tracker["status"]["latestCheckpoint"]["volumes"] == [
        {"volumeName": "scratch", "diskTarget": "vdb"}
    ]


async def test_fallback_to_full_and_forced_full_say_why() -> None:
    """The launcher making a full backup of an incremental request: type Full, and the
    Progressing message says why; forceFullBackup asks for no base at all."""
    latest = {"status": {"latestCheckpoint": {"name": "t-1"}}}
    api, ctl, current = rig(source=TRACKER_REF, tracker=latest)
    await ctl.sync("ns/b")
    api.stored(PODS, f"ns/{POD}")["status"] = {"phase": "Running"}
    api.replies = [reply("Running", full_reason="checkpoint 't-1' is unknown to the VM's libvirt")]
    await ctl.sync("ns/b")
    backup = current()
    cond = backup.status.condition("Progressing")  # type: ignore[arg-type]
    assert backup.status.type == "Full"
    assert cond is not None and "unknown to the VM's libvirt" in (cond.message or "")
    api.replies = [reply("Completed")]
    await ctl.sync("ns/b")
    final = current().status.condition("Done")  # type: ignore[arg-type]
    assert final is not None and "Full backup of 1 volume(s) completed; full backup instead" in (
        final.message or ""
    )
    api, ctl, current = rig(source=TRACKER_REF, tracker=latest, force_full=True)
    await ctl.sync("ns/b")
    api.stored(PODS, f"ns/{POD}")["status"] = {"phase": "Running"}
    api.replies = [reply("Running")]
    await ctl.sync("ns/b")
    assert "incremental" not in api.requests[0]


async def test_a_failed_job_ends_done_with_libvirts_message() -> None:
    """A job that fails: Done=True, reason BackupFailed, libvirt's message; the tracker is
    left alone."""
    api, ctl, current = rig()
    await ctl.sync("ns/b")
    api.stored(PODS, f"ns/{POD}")["status"] = {"phase": "Running"}
    api.replies = [reply("Running"), reply("Failed")]
    await ctl.sync("ns/b")
    current()
    await ctl.sync("ns/b")
    backup = current()
    assert conditions(backup)["Done"] == ("True", "BackupFailed")
    cond = backup.status.condition("Done")  # type: ignore[arg-type]
    assert cond is not None and "disk full" in (cond.message or "")
