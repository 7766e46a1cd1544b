"""Decentralized migration wired into the migration controller (decentral_io.py): the
receiving VMIM renders the target pod from the receiving VMI in its namespace, off the
sending VMI's node; the sending VMIM waits for the target half, then hands the source VMI
the receiving side's address and ports, naming both VMIs; the sender's end reaches the
receiver through the cache."""

from __future__ import annotations

import copy
from typing import Any, cast

from controller.config import MigrationConfig, TemplateConfig
from controller.informers import build_informers
from controller.migration.controller import MigrationController
from controller.migration.decentral import PeerOutcome
from controller.migration.decentral_io import sender_outcome
from controller.migration.sync_config import SyncConfig
from controller.reconcile import PodWriter
from controller.services.template import TemplateService
from shared.kube import (
    VMIMS,
    VMIS,
    Expectations,
    KubeClient,
    QueueConfig,
    Registry,
    StatusWriter,
    WorkQueue,
)
from shared.labels import MIGRATION_JOB_LABEL, RECEIVER_ANNOTATION
from shared.launcherpod import decode_pod
from shared.model import VirtualMachineInstance, VirtualMachineInstanceMigration
from tests.unit.controller import builders
from tests.unit.controller.builders import pod_dict, vmi_dict
from tests.unit.shared.kube.fakes import FakeApi, FakeClock, FakeTimers

MID = "mig-1"
LOCAL_URL = "virt-synchronization-controller.kubevirt.svc:9185"
Migration = VirtualMachineInstanceMigration


def _vmi(ns: str, name: str, uid: str, status: dict[str, Any]) -> dict[str, Any]:
    raw = vmi_dict(name)
    raw["metadata"].update(namespace=ns, uid=uid)
    raw["status"] = status
    return raw


def _vmim(ns: str, name: str, vmi: str, half: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"},
            "spec": {"vmiName": vmi, **half}}  # fmt: skip


class Rig:
    def __init__(self, *, sync: SyncConfig | None = None, connect_url: str = LOCAL_URL) -> None:
        self.api = FakeApi()
        client = cast(KubeClient, self.api)
        registry = Registry()
        self.informers = build_informers(client)
        clock = FakeClock()
        self.ctl = MigrationController(
            builders.deps(client, self.informers, registry=registry),
            queue=WorkQueue(
                QueueConfig(name="m"), registry=registry, clock=clock, timers=FakeTimers(clock)
            ),
            pods=PodWriter(client, Expectations()),
            writer=StatusWriter(client, VMIMS, model=Migration, registry=registry),
            templates=TemplateService(TemplateConfig()),
            config=MigrationConfig(),
            sync=sync,
        )
        running = {"phase": "Running", "nodeName": "node01",
                   "conditions": [{"type": "LiveMigratable", "status": "True"}]}  # fmt: skip
        self.vmi(_vmi("a", "src", "uid-src", running))
        receiver = _vmi("b", "dst", "uid-dst", {"phase": "WaitingForSync"})
        receiver["metadata"]["annotations"] = {RECEIVER_ANNOTATION: "true"}
        self.vmi(receiver)
        source_pod = pod_dict("virt-launcher-src-aaaaa", uid="src-pod", phase="Running",
                              node="node01", vmi_uid="uid-src")  # fmt: skip
        self.informers.pods.store.upsert("a/virt-launcher-src-aaaaa", decode_pod(source_pod))
        self.vmim(_vmim("b", "in", "dst", {"receive": {"migrationID": MID}}))
        send = {"migrationID": MID, "connectURL": connect_url}
        self.vmim(_vmim("a", "out", "src", {"sendTo": send}))

    def vmi(self, raw: dict[str, Any]) -> None:
        stored = self.api.seed(VMIS, raw)
        key = f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"
        self.informers.vmis.store.upsert(
            key, VirtualMachineInstance.from_dict(copy.deepcopy(stored))
        )

    def vmim(self, raw: dict[str, Any]) -> None:
        stored = self.api.seed(VMIMS, raw)
        key = f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"
        self.informers.migrations.store.upsert(key, Migration.from_dict(copy.deepcopy(stored)))

    def refresh(self, key: str) -> None:
        """The cache catches up with the API for VMIM `key`."""
        self.vmim(self.api.stored(VMIMS, key))

    def pods(self) -> list[dict[str, Any]]:
        return [o for (plural, _), o in self.api.objects.items() if plural == "pods"]


async def test_the_receiver_renders_its_target_pod_and_the_sender_waits() -> None:
    """The receiving VMIM creates one target pod in namespace b from the receiving VMI,
    labelled with its own UID and kept off the sending VMI's node; the sending VMIM
    creates none and stays Synchronizing while the target half is not published."""
    rig = Rig()
    await rig.ctl.sync("b/in")
    (pod,) = rig.pods()
    assert pod["metadata"]["namespace"] == "b"
    assert pod["metadata"]["labels"][MIGRATION_JOB_LABEL] == "uid-in"
    assert pod["metadata"]["labels"]["kubevirt.io/created-by"] == "uid-dst"
    assert "node01" in str(pod["spec"]["affinity"])
    await rig.ctl.sync("a/out")
    assert len(rig.pods()) == 1
    assert rig.api.stored(VMIMS, "a/out")["status"]["phase"] == "Synchronizing"
    assert "migrationState" not in rig.api.stored(VMIS, "a/src")["status"]


async def test_the_receiver_waits_for_sync_until_a_live_sender_is_there() -> None:
    """With no sending VMIM of its migrationID (or only a final one) the receiving VMIM
    stays WaitingForSync and creates no target pod; a live sender whose VMI runs lets it
    go on (Pending, then its target pod)."""
    rig = Rig()
    sender = rig.api.stored(VMIMS, "a/out")
    rig.informers.migrations.store.remove("a/out")
    await rig.ctl.sync("b/in")
    assert rig.api.stored(VMIMS, "b/in")["status"]["phase"] == "WaitingForSync"
    assert rig.pods() == []
    rig.vmim({**sender, "status": {"phase": "Failed"}})
    rig.refresh("b/in")
    await rig.ctl.sync("b/in")
    assert rig.api.stored(VMIMS, "b/in")["status"]["phase"] == "Failed"
    rig = Rig()
    await rig.ctl.sync("b/in")
    assert rig.api.stored(VMIMS, "b/in")["status"]["phase"] == "Scheduling"
    assert len(rig.pods()) == 1


async def test_the_sender_hands_the_source_vmi_the_receiving_sides_target() -> None:
    """Once the receiving VMI's migrationState (for its VMIM) names the target pod, node
    and the target handler's address and ports, the sending VMIM writes the source VMI's
    migrationState pointing there, naming both VMIs (sourceState / targetState)."""
    rig = Rig()
    target = {"migrationUid": "uid-in", "targetNode": "node02", "targetPod": "virt-launcher-dst-b",
              "targetNodeAddress": "10.1.0.2", "targetDirectMigrationNodePorts": {"49152": 0}}  # fmt: skip
    rig.vmi(_vmi("b", "dst", "uid-dst", {"phase": "WaitingForSync", "migrationState": target}))
    await rig.ctl.sync("a/out")
    state = rig.api.stored(VMIS, "a/src")["status"]["migrationState"]
    assert state["migrationUid"] == "uid-out"
    assert (state["sourceNode"], state["sourcePod"]) == ("node01", "virt-launcher-src-aaaaa")
    assert (state["targetNode"], state["targetNodeAddress"]) == ("node02", "10.1.0.2")
    assert state["targetDirectMigrationNodePorts"] == {"49152": 0}
    assert state["targetState"] == {
        "migrationUID": "uid-in",
        "domainName": "dst",
        "domainNamespace": "b",
    }
    assert state["sourceState"]["virtualMachineInstanceUID"] == "uid-src"
    assert rig.api.stored(VMIMS, "a/out")["status"]["phase"] == "TargetReady"


def test_the_senders_end_is_read_from_its_vmim() -> None:
    """Succeeded once a sending VMIM succeeded; Failed (with its reason) once every
    sending VMIM failed; None while one still runs."""

    def sent(phase: str, reason: str = "") -> Migration:
        raw = _vmim("a", "out", "src", {"sendTo": {"migrationID": MID, "connectURL": "x:1"}})
        raw["status"] = {"phase": phase, "migrationState": {"failureReason": reason}}
        return Migration.from_dict(raw)

    assert sender_outcome([sent("Succeeded")]) == (PeerOutcome.SUCCEEDED, "")
    assert sender_outcome([sent("Failed", "boom")]) == (PeerOutcome.FAILED, "boom")
    assert sender_outcome([sent("Running"), sent("Failed")]) is None
    assert sender_outcome([]) is None


def _vmi_failure(rig: Rig) -> list[dict[str, Any]]:
    """The stored receiving VMI's DecentralizedLiveMigrationFailure conditions."""
    conditions = rig.api.stored(VMIS, "b/dst")["status"].get("conditions", [])
    return [c for c in conditions if c["type"] == "DecentralizedLiveMigrationFailure"]


async def test_the_waiting_receiving_vmi_carries_kubevirts_failure_condition() -> None:
    """While its VMIM is WaitingForSync the receiving VMI has KubeVirt's
    DecentralizedLiveMigrationFailure condition (True, DecentralizedNotLiveMigratable,
    its synchronization controller's waiting message, no probe time), written once; the
    condition goes when the VMIM moves on to Pending."""
    rig = Rig()
    sender = rig.api.stored(VMIMS, "a/out")
    rig.informers.migrations.store.remove("a/out")
    await rig.ctl.sync("b/in")
    (cond,) = _vmi_failure(rig)
    assert (cond["status"], cond["reason"]) == ("True", "DecentralizedNotLiveMigratable")
    assert cond["message"] == "waiting for incoming synchronization, unable to proceed"
    assert "lastProbeTime" not in cond and cond["lastTransitionTime"]
    assert rig.api.stored(VMIS, "b/dst")["status"]["phase"] == "WaitingForSync"
    rig.vmi(rig.api.stored(VMIS, "b/dst"))
    rig.refresh("b/in")
    before = rig.api.stored(VMIS, "b/dst")["metadata"].get("resourceVersion")
    await rig.ctl.sync("b/in")
    assert rig.api.stored(VMIS, "b/dst")["metadata"].get("resourceVersion") == before
    rig.vmim(sender)
    await rig.ctl.sync("b/in")
    assert rig.api.stored(VMIMS, "b/in")["status"]["phase"] == "Scheduling"
    assert _vmi_failure(rig) == []


async def test_a_failed_receiving_vmim_leaves_its_vmi_waiting_and_told() -> None:
    """The sending VMIM failed while the receiver waited: the receiving VMIM fails, its
    VMI's condition is cleared and its migrationState says failed and completed (with an
    end time), as KubeVirt's; nothing here ends the VMI (it stays WaitingForSync)."""
    rig = Rig()
    rig.informers.migrations.store.remove("a/out")
    await rig.ctl.sync("b/in")
    assert _vmi_failure(rig)
    rig.vmi(rig.api.stored(VMIS, "b/dst"))
    rig.refresh("b/in")
    sender = rig.api.stored(VMIMS, "a/out")
    rig.vmim({**sender, "status": {"phase": "Failed"}})
    await rig.ctl.sync("b/in")
    assert rig.api.stored(VMIMS, "b/in")["status"]["phase"] == "Failed"
    status = rig.api.stored(VMIS, "b/dst")["status"]
    assert _vmi_failure(rig) == [] and status["phase"] == "WaitingForSync"
    state = status["migrationState"]
    assert state["failed"] and state["completed"] and state["endTimestamp"]
    assert state["migrationUid"] == "uid-in"
