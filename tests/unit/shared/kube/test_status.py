"""The status writer: no-op writes skipped, merge patches of the diff with optimistic concurrency, conflicts re-applied
onto fresh state (keeping the other writer's fields), bounded retries, counts per verb."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from shared.kube.errors import Conflict, NotFound
from shared.kube.metrics import Registry
from shared.kube.resources import VMIS
from shared.kube.status import StatusWriter, StatusWriterConfig
from shared.model import (
    ConditionStatus,
    VirtualMachineInstance,
    VMICondition,
    VMIConditionType,
    VMIPhase,
)
from tests.unit.shared.kube.fakes import FakeApi


def seed(api: FakeApi, **status: Any) -> VirtualMachineInstance:
    body = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm1", "namespace": "ns", "labels": {"app": "x"}},
        "spec": {},
        "status": status,
    }
    return VirtualMachineInstance.from_dict(api.seed(VMIS, body))


def with_status(vmi: VirtualMachineInstance, **changes: Any) -> VirtualMachineInstance:
    return dataclasses.replace(vmi, status=dataclasses.replace(vmi.status, **changes))


def make(api: FakeApi, attempts: int = 4) -> tuple[StatusWriter[VirtualMachineInstance], Registry]:
    registry = Registry()
    writer = StatusWriter(
        api,
        VMIS,
        model=VirtualMachineInstance,
        registry=registry,
        config=StatusWriterConfig(max_attempts=attempts),
    )
    return writer, registry


def refresher(api: FakeApi) -> Any:
    async def refresh() -> VirtualMachineInstance:
        return VirtualMachineInstance.from_dict(await api.get(VMIS, "vm1", namespace="ns"))

    return refresh


async def test_unchanged_status_is_not_written() -> None:
    """Old and new statuses that are equal cost no API call."""
    api = FakeApi()
    vmi = seed(api, phase="Pending")
    writer, _ = make(api)
    result = await writer.write_status(vmi, with_status(vmi), refresh=refresher(api))
    assert result is vmi
    assert api.writes() == []
    assert writer.counts == {"skipped": 1}


async def test_changed_status_is_patched_with_resource_version() -> None:
    """A changed status is written once: a merge patch of the diff to the status
    subresource, with the resourceVersion precondition."""
    api = FakeApi()
    vmi = seed(api, phase="Pending")
    writer, registry = make(api)
    new = with_status(vmi, phase=VMIPhase.SCHEDULING)
    result = await writer.write_status(vmi, new, refresh=refresher(api))
    assert api.writes() == ["patch"]
    assert result.status.phase is VMIPhase.SCHEDULING
    assert result.metadata.resource_version != vmi.metadata.resource_version
    assert (
        'kubevirt_py_status_writes_total{resource="virtualmachineinstances",verb="patch_status"} 1'
        in registry.render()
    )


async def test_conflict_reapplies_our_change_onto_fresh_state() -> None:
    """On Conflict the writer re-reads, keeps the other writer's fields and applies ours."""
    api = FakeApi()
    vmi = seed(api, phase="Scheduling")
    ready = {"type": "Ready", "status": "True"}

    def handler_wrote(current: dict[str, Any]) -> None:
        current["status"]["conditions"] = [ready]

    api.interfere = handler_wrote
    api.conflicts_before_write = 1
    writer, _ = make(api)
    new = with_status(vmi, phase=VMIPhase.SCHEDULED, node_name="n1")
    result = await writer.write_status(vmi, new, refresh=refresher(api))
    assert api.writes() == ["patch", "patch"]
    assert api.stored(VMIS, "ns/vm1")["status"] == {
        "phase": "Scheduled",
        "nodeName": "n1",
        "conditions": [ready],
    }
    assert result.status.condition_is_true(VMIConditionType.READY)
    assert writer.counts == {"conflict": 1, "patch_status": 1}


async def test_conflict_where_fresh_state_already_matches_is_skipped() -> None:
    """If the fresh object already carries our change, no second write is made."""
    api = FakeApi()
    vmi = seed(api, phase="Scheduling")

    def same_change(current: dict[str, Any]) -> None:
        current["status"]["phase"] = "Scheduled"

    api.interfere = same_change
    api.conflicts_before_write = 1
    writer, _ = make(api)
    result = await writer.write_status(
        vmi, with_status(vmi, phase=VMIPhase.SCHEDULED), refresh=refresher(api)
    )
    assert api.writes() == ["patch"]
    assert result.status.phase is VMIPhase.SCHEDULED
    assert writer.counts == {"conflict": 1, "skipped": 1}


async def test_persistent_conflicts_give_up_after_max_attempts() -> None:
    """A write that keeps conflicting raises Conflict after the configured attempts."""
    api = FakeApi()
    vmi = seed(api, phase="Scheduling")
    api.conflicts_before_write = 100
    writer, _ = make(api, attempts=3)
    with pytest.raises(Conflict):
        await writer.write_status(
            vmi, with_status(vmi, phase=VMIPhase.SCHEDULED), refresh=refresher(api)
        )
    assert api.writes() == ["patch"] * 3
    assert writer.counts["conflict"] == 3


async def test_refresh_errors_propagate() -> None:
    """If the object vanished, the refresh's NotFound reaches the caller."""
    api = FakeApi()
    vmi = seed(api, phase="Scheduling")
    api.conflicts_before_write = 1
    writer, _ = make(api)

    async def gone() -> VirtualMachineInstance:
        raise NotFound(404, "NotFound", "vm1")

    with pytest.raises(NotFound):
        await writer.write_status(vmi, with_status(vmi, phase=VMIPhase.SCHEDULED), refresh=gone)


async def test_removed_status_fields_are_removed() -> None:
    """Clearing a status field (a condition list emptied) is written as a removal."""
    api = FakeApi()
    cond = {"type": "Ready", "status": "True"}
    vmi = seed(api, phase="Running", conditions=[cond])
    writer, _ = make(api)
    await writer.write_status(vmi, with_status(vmi, conditions=()), refresh=refresher(api))
    assert api.stored(VMIS, "ns/vm1")["status"] == {"phase": "Running"}


async def test_metadata_patch_carries_resource_version_and_only_our_changes() -> None:
    """Labels and finalizers are merge-patched with the resourceVersion; no-op skipped."""
    api = FakeApi()
    vmi = seed(api)
    writer, _ = make(api)
    meta = dataclasses.replace(
        vmi.metadata,
        labels={**vmi.metadata.labels, "kubevirt.io/nodeName": "n1"},
        finalizers=("kubevirt.io/virtualMachineControllerFinalize",),
    )
    result = await writer.write_metadata(
        vmi, dataclasses.replace(vmi, metadata=meta), refresh=refresher(api)
    )
    assert result.metadata.labels == {"app": "x", "kubevirt.io/nodeName": "n1"}
    assert result.metadata.finalizers == ("kubevirt.io/virtualMachineControllerFinalize",)
    assert await writer.write_metadata(result, result, refresh=refresher(api)) is result
    assert api.writes() == ["patch"]


async def test_metadata_conflict_keeps_foreign_finalizers_and_labels() -> None:
    """After a conflict, our finalizer removal and label change are re-applied onto fresh
    metadata without dropping what another writer added."""
    api = FakeApi()
    body_meta = {"finalizers": ["ours", "theirs-1"]}
    vmi = seed(api)
    api.objects[("virtualmachineinstances", "ns/vm1")]["metadata"].update(body_meta)
    vmi = VirtualMachineInstance.from_dict(await api.get(VMIS, "vm1", namespace="ns"))

    def other_writer(current: dict[str, Any]) -> None:
        current["metadata"]["finalizers"].append("theirs-2")
        current["metadata"]["labels"]["other"] = "y"

    api.interfere = other_writer
    api.conflicts_before_write = 1
    writer, _ = make(api)
    meta = dataclasses.replace(vmi.metadata, finalizers=("theirs-1",), labels={"app": "z"})
    await writer.write_metadata(
        vmi, dataclasses.replace(vmi, metadata=meta), refresh=refresher(api)
    )
    stored = api.stored(VMIS, "ns/vm1")["metadata"]
    assert stored["finalizers"] == ["theirs-1", "theirs-2"]
    assert stored["labels"] == {"app": "z", "other": "y"}


async def test_write_does_metadata_then_status_on_the_new_version() -> None:
    """write() patches changed metadata, then writes status against the patched object."""
    api = FakeApi()
    vmi = seed(api, phase="Scheduling")
    writer, _ = make(api)
    cond = VMICondition(type=VMIConditionType.READY, status=ConditionStatus.FALSE)
    new = dataclasses.replace(
        with_status(vmi, phase=VMIPhase.SCHEDULED, conditions=(cond,)),
        metadata=dataclasses.replace(
            vmi.metadata, labels={"app": "x", "kubevirt.io/nodeName": "n1"}
        ),
    )
    result = await writer.write(vmi, new, refresh=refresher(api))
    assert api.writes() == ["patch", "patch"]
    assert writer.counts == {"patch_metadata": 1, "patch_status": 1}
    assert result.metadata.labels["kubevirt.io/nodeName"] == "n1"
    assert result.status.phase is VMIPhase.SCHEDULED


async def test_write_with_nothing_changed_makes_no_call() -> None:
    """write() of an unchanged object is free."""
    api = FakeApi()
    vmi = seed(api, phase="Running")
    writer, _ = make(api)
    assert await writer.write(vmi, vmi, refresh=refresher(api)) is vmi
    assert api.writes() == []
