"""Node decisions: a handler whose heartbeat is older than the timeout is dead.

Then its node is labelled `kubevirt.io/schedulable=false` (no new launcher pods land
there) and every VMI handed to that node whose launcher pod is gone — deleted from the
API, or terminal — is Failed with reason NodeUnresponsive, so its VM can start it
elsewhere. A pod that is merely being deleted is not gone: on a node whose kubelet is
alive the guest may still run, and starting it a second time elsewhere would run two
guests on one disk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.labels import HEARTBEAT_ANNOTATION, SCHEDULABLE_LABEL
from controller.pods import LauncherPod
from shared.model import VirtualMachineInstance, parse_time


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeView:
    """The parts of a Node the node controller reads."""

    name: str
    schedulable: str | None = None
    heartbeat: datetime | None = None

    @property
    def has_handler(self) -> bool:
        """A handler has heartbeated here at least once."""
        return self.heartbeat is not None


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
    return NodeView(
        name=str(meta.get("name") or ""),
        schedulable=(meta.get("labels") or {}).get(SCHEDULABLE_LABEL),
        heartbeat=heartbeat,
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
    doomed = []
    for vmi in vmis:
        if vmi.is_final() or vmi.status.node_name != node.name:
            continue
        pods = [p for p in pods_of.get(vmi.uid, ()) if p.node_name == node.name]
        if all(p.terminal for p in pods):
            message = (
                f"the handler on node {node.name} last reported {int(age)}s ago and the "
                f"launcher pod is gone"
            )
            doomed.append((vmi, message))
    return NodePlan(mark_unschedulable=node.schedulable != "false", fail_vmis=tuple(doomed))
