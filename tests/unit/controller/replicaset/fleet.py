"""Builders for replica set tests: a set, its member VMIs, orphans."""

from __future__ import annotations

from typing import Any

from shared.model import VirtualMachineInstance, VirtualMachineInstanceReplicaSet
from tests.unit.controller.builders import ago

RS_UID = "rs-uid-1"


def rs_dict(
    name: str = "web", *, replicas: int | None = 3, paused: bool = False, **status: Any
) -> dict[str, Any]:
    """A replica set selecting app=web, its template a small VMI."""
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"domain": {"memory": {"guest": "64Mi"}, "devices": {}}},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    if paused:
        spec["paused"] = True
    raw = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstanceReplicaSet",
        "metadata": {"name": name, "namespace": "ns", "uid": RS_UID, "resourceVersion": "1"},
        "spec": spec,
    }
    if status:
        raw["status"] = status
    return raw


def make_rs(**kw: Any) -> VirtualMachineInstanceReplicaSet:
    """A parsed replica set (keywords as rs_dict)."""
    return VirtualMachineInstanceReplicaSet.from_dict(rs_dict(**kw))


def member_dict(
    name: str,
    *,
    phase: str | None = "Running",
    ready: bool = True,
    owner: str | None = RS_UID,
    labels: dict[str, str] | None = None,
    node: str | None = "node01",
    age: float = 60.0,
    deleting: bool = False,
) -> dict[str, Any]:
    """A VMI of the set (owner=None: an orphan; another UID: someone else's)."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "resourceVersion": "5",
        "labels": {"app": "web"} if labels is None else labels,
        "creationTimestamp": ago(age),
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachineInstanceReplicaSet",
                "name": "web",
                "uid": owner,
                "controller": True,
            }
        ]
    if deleting:
        meta["deletionTimestamp"] = ago(0)
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if node is not None:
        status["nodeName"] = node
    status["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": meta,
        "spec": {"domain": {"memory": {"guest": "64Mi"}, "devices": {}}},
        "status": status,
    }


def member(name: str, **kw: Any) -> VirtualMachineInstance:
    """A parsed member VMI (keywords as member_dict)."""
    return VirtualMachineInstance.from_dict(member_dict(name, **kw))
