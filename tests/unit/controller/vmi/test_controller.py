"""The VMI controller's sync against in-memory caches and a fake API server: expectations,
write counts, the write-back overlay and sync errors becoming conditions."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, cast

import pytest

from controller.config import TemplateConfig, TimingConfig
from controller.errors import SyncError
from controller.informers import Informers, build_informers
from controller.node.logic import NodeView
from controller.reconcile import PodWriter
from controller.services.template import TemplateService
from controller.vmi.controller import VMIController
from shared.kube import (
    VMIS,
    DeleteOptions,
    Expectations,
    KubeClient,
    NotFound,
    QueueConfig,
    Registry,
    ServerError,
    StatusWriter,
    StatusWriterConfig,
    WorkQueue,
)
from shared.launcherpod import decode_pod
from shared.model import VirtualMachineInstance
from tests.unit.controller import builders
from tests.unit.controller.builders import NOW, vmi_dict
from tests.unit.shared.kube.fakes import FakeApi, FakeClock, FakeTimers

KEY = "ns/vm1"


class Api(FakeApi):
    """FakeApi with delete, as the controllers call it."""

    async def delete(
        self,
        resource: Any,
        name: str,
        *,
        namespace: str | None = None,
        options: DeleteOptions | None = None,
    ) -> dict[str, Any]:
        self.calls.append(("delete", resource.plural))
        key = self._key(resource, name, namespace)
        if key not in self.objects:
            raise NotFound(404, "NotFound", name)
        return self.objects.pop(key)


class Rig:
    """A VMIController wired to caches the test fills by hand."""

    def __init__(self) -> None:
        self.api = Api()
        client = cast(KubeClient, self.api)
        self.registry = Registry()
        self.informers: Informers = build_informers(client)
        self.expectations = Expectations()
        clock = FakeClock()
        self.queue = WorkQueue(
            QueueConfig(name="vmi"), registry=self.registry, clock=clock, timers=FakeTimers(clock)
        )
        self.writer = StatusWriter(
            client,
            VMIS,
            model=VirtualMachineInstance,
            registry=self.registry,
            config=StatusWriterConfig(max_attempts=1),
        )
        self.ctl = VMIController(
            builders.deps(client, self.informers, registry=self.registry),
            queue=self.queue,
            pods=PodWriter(client, self.expectations),
            writer=self.writer,
            templates=TemplateService(TemplateConfig()),
            timing=TimingConfig(vmi_unschedulable_timeout=60),
        )
        _, pod_handlers = self.ctl.handlers()
        self.informers.pods.add_handlers(pod_handlers)

    def seed_vmi(self, raw: Mapping[str, Any] | None = None) -> VirtualMachineInstance:
        stored = self.api.seed(VMIS, raw or vmi_dict())
        vmi = VirtualMachineInstance.from_dict(copy.deepcopy(stored))
        self.informers.vmis.store.upsert(KEY, vmi)
        return vmi

    def observe_pods(self, **status: Any) -> None:
        """Let the pod informer see every pod the fake API holds (firing its handlers)."""
        for (plural, key), stored in self.api.objects.items():
            if plural == "pods":
                raw = copy.deepcopy(stored)
                raw.setdefault("status", {}).update(status)
                if status.get("phase") in ("Running", "Failed", "Succeeded"):
                    raw.setdefault("spec", {})["nodeName"] = "node01"
                self.informers.pods._put(key, raw["metadata"]["resourceVersion"], decode_pod(raw))

    def stored_vmi(self) -> VirtualMachineInstance:
        return VirtualMachineInstance.from_dict(self.api.stored(VMIS, KEY))

    def writes(self) -> list[str]:
        return self.api.writes()


async def test_first_sync_creates_one_pod_and_writes_scheduling_once() -> None:
    """New VMI: one pod create, one status write; a re-sync before the pod is seen does nothing."""
    rig = Rig()
    rig.seed_vmi()
    await rig.ctl.sync(KEY)
    assert rig.writes() == ["create", "patch"]
    assert rig.stored_vmi().status.phase == "Scheduling"
    await rig.ctl.sync(KEY)  # pod informer lags: expectations hold the sync back
    assert rig.writes() == ["create", "patch"]


async def test_stale_vmi_cache_does_not_cause_a_second_write() -> None:
    """The pod is seen before the VMI update: planning from our own write changes nothing."""
    rig = Rig()
    rig.seed_vmi()
    await rig.ctl.sync(KEY)
    rig.observe_pods(phase="Pending")
    await rig.ctl.sync(KEY)  # the VMI cache still says phase ""
    assert rig.writes() == ["create", "patch"]


async def test_handoff_costs_a_metadata_patch_and_a_status_write() -> None:
    """Pod Running: label + finalizer in one metadata patch, Scheduled in one status patch."""
    rig = Rig()
    rig.seed_vmi()
    await rig.ctl.sync(KEY)
    rig.observe_pods(phase="Running")
    await rig.ctl.sync(KEY)
    assert rig.writes() == ["create", "patch", "patch", "patch"]
    vmi = rig.stored_vmi()
    assert vmi.status.phase == "Scheduled" and vmi.status.node_name == "node01"
    assert vmi.metadata.labels["kubevirt.io/nodeName"] == "node01"
    assert "kubevirt.io/virtualMachineControllerFinalize" in vmi.metadata.finalizers


async def test_failed_pod_create_becomes_a_condition_and_releases_expectations() -> None:
    """A refused create: Synchronized=False/FailedCreate written, SyncError raised, and the
    expectation dropped so the retry is not blocked."""
    rig = Rig()
    rig.seed_vmi()
    rig.api.fail_next = ServerError(500, "InternalError", "etcd is sad")
    with pytest.raises(SyncError) as err:
        await rig.ctl.sync(KEY)
    assert err.value.reason == "FailedCreate"
    cond = rig.stored_vmi().status.condition("Synchronized")
    assert (
        cond is not None and cond.reason == "FailedCreate" and "etcd is sad" in (cond.message or "")
    )
    assert rig.expectations.satisfied(KEY)


async def test_process_requeues_a_sync_error_with_backoff() -> None:
    """process(): a SyncError puts the key back rate-limited; success forgets its backoff."""
    rig = Rig()
    rig.seed_vmi()
    rig.api.fail_next = ServerError(500, "InternalError", "no")
    await rig.ctl.process(KEY)
    assert rig.queue.num_requeues(KEY) == 1
    await rig.ctl.process(KEY)
    assert rig.queue.num_requeues(KEY) == 0


async def test_deleted_vmi_is_ignored() -> None:
    """A key whose VMI is gone from the cache costs nothing."""
    rig = Rig()
    await rig.ctl.sync(KEY)
    assert rig.writes() == []


async def test_pod_update_that_changes_nothing_we_read_does_not_enqueue() -> None:
    """A pod event whose compact view is unchanged costs no sync; a resync still does."""
    rig = Rig()
    rig.seed_vmi()
    await rig.ctl.sync(KEY)
    rig.observe_pods()
    while len(rig.queue):
        key = await rig.queue.get()
        assert key is not None
        rig.queue.done(key)
    rig.observe_pods()  # a new resourceVersion, the same view
    assert len(rig.queue) == 0
    rig.informers.pods.resync()
    assert len(rig.queue) == 1


async def running(rig: Rig) -> None:
    """A VMI handed to node01 and made Running (as its handler would)."""
    rig.seed_vmi()
    await rig.ctl.sync(KEY)
    rig.observe_pods(phase="Running")
    await rig.ctl.sync(KEY)
    stored = rig.api.stored(VMIS, KEY)
    stored["status"]["phase"] = "Running"
    rig.informers.vmis.store.upsert(KEY, VirtualMachineInstance.from_dict(copy.deepcopy(stored)))


KILLED = [{"name": "compute", "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]


async def test_dead_launcher_pod_fails_a_running_vmi_with_one_write() -> None:
    """The launcher pod ends in Error under a Running VMI: one status write to
    Failed(LauncherDied); syncing again leaves the status alone (a final VMI's is never
    touched) and only drops the finalizer (its only pod is terminal)."""
    rig = Rig()
    await running(rig)
    before = len(rig.writes())
    rig.observe_pods(phase="Failed", containerStatuses=KILLED)
    await rig.ctl.sync(KEY)
    assert rig.writes()[before:] == ["patch"]
    vmi = rig.stored_vmi()
    assert (vmi.status.phase, vmi.status.reason) == ("Failed", "LauncherDied")
    await rig.ctl.sync(KEY)
    after = rig.stored_vmi()
    assert after.status == vmi.status and after.metadata.finalizers == ()


async def test_dead_launcher_on_a_dead_handlers_node_is_left_to_the_node_controller() -> None:
    """The node's handler heartbeat is stale: the VMI controller leaves the phase alone
    (the node controller fails it as NodeUnresponsive)."""
    rig = Rig()
    await running(rig)
    stale = NodeView(name="node01", schedulable="false", heartbeat=NOW - timedelta(minutes=10))
    rig.informers.nodes._put("node01", "1", stale)
    rig.observe_pods(phase="Failed", containerStatuses=KILLED)
    await rig.ctl.sync(KEY)
    assert rig.stored_vmi().status.phase == "Running"
