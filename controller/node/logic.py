"""Node decisions: when is a node dead, and which of its VMIs are known stopped.

The rule (KubeVirt's, made explicit):

- a node's handler is *down* when its heartbeat is older than the timeout
  (`--heartbeat-timeout`); the node is then labelled `kubevirt.io/schedulable=false`, so
  no new launcher pod lands there;
- a node is *dead* when its handler is down AND the Node's Ready condition is not True
  (the kubelet stopped posting status: kube-controller-manager set it Unknown after its
  node-monitor grace period, or the kubelet reported False);
- a VMI handed to such a node is Failed with reason NodeUnresponsive, so its VM (runStrategy
  Always or RerunOnFailure) starts it on another node, once every launcher pod of it there
  is *gone*: deleted from the API, or terminal — and, on a dead node only, also a pod being
  deleted (the taint manager evicts pods of an unreachable node after their toleration, or
  an admin deletes them), or any pod when the node is fenced (tainted
  `node.kubernetes.io/out-of-service`, Kubernetes' non-graceful node shutdown).

A pod being deleted on a node whose kubelet is alive is not gone: the guest may still run,
and starting it again elsewhere would run two guests on one disk. A pod the API still shows
Running on a dead node is not gone either: the node may only be cut off, its guest alive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shared.labels import HEARTBEAT_ANNOTATION, SCHEDULABLE_LABEL
from shared.launcherpod import LauncherPod
from shared.model import VirtualMachineInstance, parse_time

OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeView:
    """The parts of a Node the node controller reads."""

    name: str
    schedulable: str | None = None
    heartbeat: datetime | None = None
    # The Ready condition: True, False (False or Unknown), None (no such condition).
    ready: bool | None = None
    # Tainted node.kubernetes.io/out-of-service: an admin declared it powered off.
    fenced: bool = False
    # Its labels (a migration's addedNodeSelector is matched against them).
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def has_handler(self) -> bool:
        """A handler has heartbeated here at least once."""
        return self.heartbeat is not None

    def handler_down(self, *, now: datetime, timeout: float) -> bool:
        """The handler heartbeated once and not within `timeout` seconds."""
        if self.heartbeat is None:
            return False
        return (now - self.heartbeat).total_seconds() >= timeout

    def dead(self, *, now: datetime, timeout: float) -> bool:
        """Handler down and the Node not Ready: nothing on it is looked after."""
        return self.ready is False and self.handler_down(now=now, timeout=timeout)

    def pod_gone(self, pod: LauncherPod, *, dead: bool) -> bool:
        """`pod` (on this node) will not run a guest again; `dead`: as `self.dead()`."""
        return pod.terminal or (dead and (pod.deleting or self.fenced))


def decode_node(raw: Mapping[str, Any]) -> NodeView:
    """The view of a raw Node dict; a malformed heartbeat counts as none."""
    meta = raw.get("metadata") or {}
    beat = (meta.get("annotations") or {}).get(HEARTBEAT_ANNOTATION)
    heartbeat = None
    if beat:
        try:
            heartbeat = parse_time(str(beat))
        except ValueError:
            heartbeat = None
    status = raw.get("status") or {}
    ready = next(
        (
            c.get("status") == "True"
            for c in status.get("conditions") or ()
            if c.get("type") == "Ready"
        ),
        None,
    )
    taints = (raw.get("spec") or {}).get("taints") or ()
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    return NodeView(
        name=str(meta.get("name") or ""),
        schedulable=labels.get(SCHEDULABLE_LABEL),
        labels=labels,
        heartbeat=heartbeat,
        ready=ready,
        fenced=any(t.get("key") == OUT_OF_SERVICE_TAINT for t in taints),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class NodePlan:
    """What one sync of one node does."""

    mark_unschedulable: bool = False
    # VMIs to fail, each with the message for its condition.
    fail_vmis: tuple[tuple[VirtualMachineInstance, str], ...] = ()
    requeue_after: float | None = None


def plan_node(
    node: NodeView,
    vmis: Sequence[VirtualMachineInstance],
    pods_of: Mapping[str, Sequence[LauncherPod]],
    *,
    now: datetime,
    timeout: float,
) -> NodePlan:
    """`vmis` are the VMIs handed to this node; `pods_of` maps VMI UID → its pods."""
    if node.heartbeat is None:
        return NodePlan()
    age = (now - node.heartbeat).total_seconds()
    if age < timeout:
        return NodePlan(requeue_after=timeout - age + 1.0)
    dead = node.dead(now=now, timeout=timeout)
    doomed = []
    for vmi in vmis:
        if vmi.is_final() or vmi.status.node_name != node.name:
            continue
        pods = [p for p in pods_of.get(vmi.uid, ()) if p.node_name == node.name]
        if all(node.pod_gone(p, dead=dead) for p in pods):
            doomed.append((vmi, _message(node, int(age), dead=dead)))
    return NodePlan(mark_unschedulable=node.schedulable != "false", fail_vmis=tuple(doomed))


def _message(node: NodeView, age: int, *, dead: bool) -> str:
    text = f"the handler on node {node.name} last reported {age}s ago"
    if node.fenced and dead:
        return f"{text}, the node is not Ready and fenced (out-of-service)"
    if dead:
        return f"{text}, the node is not Ready and the launcher pod is gone or terminating"
    return f"{text} and the launcher pod is gone"
