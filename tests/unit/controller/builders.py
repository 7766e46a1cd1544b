"""Builders for controller unit tests: VMIs, VMs, migrations and pods in a few keywords."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.deps import Deps
from controller.informers import Informers
from controller.recent import Recent
from shared.kube import VMIS, KubeClient, Registry, StatusWriter
from shared.labels import CREATED_BY_LABEL, MIGRATION_JOB_LABEL
from shared.launcherpod import LauncherPod, decode_pod
from shared.model import (
    ConditionStatus,
    MigrationPhase,
    MigrationState,
    ObjectMeta,
    OwnerReference,
    VirtualMachine,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMICondition,
    VMIPhase,
    format_time,
)

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
VMI_UID = "0b6c1d7e-aaaa-bbbb-cccc-000000000001"
VM_UID = "0b6c1d7e-aaaa-bbbb-cccc-0000000000ff"
MIG_UID = "0b6c1d7e-aaaa-bbbb-cccc-0000000000aa"


def ago(seconds: float) -> str:
    """An RFC 3339 time `seconds` before NOW."""
    return format_time(NOW - timedelta(seconds=seconds))


def vmi_dict(name: str = "vm1", *, memory: str = "128Mi") -> dict[str, Any]:
    """A small valid VMI as a user would write it."""
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "namespace": "ns", "uid": VMI_UID, "labels": {"app": "x"}},
        "spec": {
            "domain": {
                "memory": {"guest": memory},
                "devices": {"disks": [], "interfaces": []},
            },
        },
    }


def make_vmi(
    *,
    phase: VMIPhase | None = None,
    node: str | None = None,
    deleting: bool = False,
    conditions: tuple[VMICondition, ...] = (),
    migration_state: MigrationState | None = None,
    active_pods: dict[str, str] | None = None,
    owner_vm: bool = False,
    uid: str = VMI_UID,
    raw: dict[str, Any] | None = None,
) -> VirtualMachineInstance:
    """A VMI in the given state."""
    vmi = VirtualMachineInstance.from_dict(raw or vmi_dict())
    meta = dataclasses.replace(vmi.metadata, uid=uid)
    if deleting:
        meta = dataclasses.replace(meta, deletion_timestamp=ago(1))
    if owner_vm:
        ref = OwnerReference(
            api_version="kubevirt.io/v1",
            kind="VirtualMachine",
            name="vm1",
            uid=VM_UID,
            controller=True,
        )
        meta = dataclasses.replace(meta, owner_references=(ref,))
    status = dataclasses.replace(
        vmi.status,
        phase=phase,
        node_name=node,
        conditions=conditions,
        migration_state=migration_state,
        active_pods=active_pods or {},
    )
    return dataclasses.replace(vmi, metadata=meta, status=status)


def condition(type_: str, status: str = "True", **kw: Any) -> VMICondition:
    """A VMI condition."""
    return VMICondition(type=type_, status=ConditionStatus(status), **kw)


def pod_dict(
    name: str = "virt-launcher-vm1-abcde",
    *,
    uid: str = "pod-1",
    phase: str = "Pending",
    node: str | None = None,
    vmi_uid: str = VMI_UID,
    migration_uid: str | None = None,
    deleting: bool = False,
    conditions: list[dict[str, Any]] | None = None,
    container_statuses: list[dict[str, Any]] | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    """A raw launcher pod as the API server returns it."""
    labels = {"kubevirt.io": "virt-launcher", CREATED_BY_LABEL: vmi_uid}
    if migration_uid:
        labels[MIGRATION_JOB_LABEL] = migration_uid
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": uid,
        "labels": labels,
        "creationTimestamp": created or ago(10),
    }
    if deleting:
        meta["deletionTimestamp"] = ago(0)
    spec: dict[str, Any] = {"containers": [{"name": "compute", "image": "x"}]}
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase, "conditions": conditions or []}
    if container_statuses:
        status["containerStatuses"] = container_statuses
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def make_pod(**kw: Any) -> LauncherPod:
    """A decoded launcher pod (keywords as pod_dict)."""
    return decode_pod(pod_dict(**kw))


def unschedulable(since: str, message: str = "0/2 nodes are available") -> list[dict[str, Any]]:
    """Pod conditions saying the scheduler could not place it."""
    return [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": since,
        }
    ]


def make_vm(
    *,
    run_strategy: str | None = "Always",
    requests: list[dict[str, Any]] | None = None,
    status: dict[str, Any] | None = None,
    deleting: bool = False,
    generation: int = 1,
) -> VirtualMachine:
    """A VM owning template vmi_dict()'s spec."""
    spec: dict[str, Any] = {
        "template": {"metadata": {"labels": {"app": "x"}}, "spec": vmi_dict()["spec"]}
    }
    if run_strategy is not None:
        spec["runStrategy"] = run_strategy
    st = dict(status or {})
    if requests is not None:
        st["stateChangeRequests"] = requests
    meta: dict[str, Any] = {
        "name": "vm1",
        "namespace": "ns",
        "uid": VM_UID,
        "generation": generation,
    }
    if deleting:
        meta["deletionTimestamp"] = ago(0)
    return VirtualMachine.from_dict(
        {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": meta,
            "spec": spec,
            "status": st,
        }
    )


def make_migration(
    *,
    phase: str | None = None,
    deleting_since: float | None = None,
    state: MigrationState | None = None,
) -> VirtualMachineInstanceMigration:
    """A VMIM for vm1."""
    m = VirtualMachineInstanceMigration.new(
        metadata=ObjectMeta(name="mig1", namespace="ns", uid=MIG_UID),
    )
    m = VirtualMachineInstanceMigration.from_dict({**m.to_dict(), "spec": {"vmiName": "vm1"}})
    if deleting_since is not None:
        m = dataclasses.replace(
            m, metadata=dataclasses.replace(m.metadata, deletion_timestamp=ago(deleting_since))
        )
    if phase is not None or state is not None:
        status = dataclasses.replace(
            m.status, phase=MigrationPhase(phase) if phase else None, migration_state=state
        )
        m = dataclasses.replace(m, status=status)
    return m


def deps(client: KubeClient, informers: Informers, *, registry: Registry | None = None) -> Deps:
    """The loops' shared dependencies over a fake client, at NOW."""
    writer = StatusWriter(
        client, VMIS, model=VirtualMachineInstance, registry=registry or Registry()
    )
    return Deps(
        client=client,
        informers=informers,
        clock=lambda: NOW,
        vmi_recent=Recent(),
        vmi_writer=writer,
    )
