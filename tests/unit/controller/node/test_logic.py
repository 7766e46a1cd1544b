"""Node decisions: a stale handler heartbeat marks the node and fails VMIs whose pod is gone."""

from __future__ import annotations

from typing import Any

from controller.node.logic import NodeView, decode_node, plan_node
from shared.model import VMIPhase
from tests.unit.controller.builders import NOW, VMI_UID, ago, make_pod, make_vmi

TIMEOUT = 300.0


def node(
    age: float | None,
    schedulable: str | None = "true",
    *,
    ready: str | None = None,
    taints: tuple[str, ...] = (),
) -> NodeView:
    labels = {"kubevirt.io/schedulable": schedulable} if schedulable else {}
    annotations = {"kubevirt.io/heartbeat": ago(age)} if age is not None else {}
    raw: dict[str, Any] = {
        "metadata": {"name": "node01", "labels": labels, "annotations": annotations},
        "spec": {"taints": [{"key": t, "effect": "NoExecute"} for t in taints]},
    }
    if ready is not None:
        raw["status"] = {"conditions": [{"type": "MemoryPressure", "status": "False"},
                                        {"type": "Ready", "status": ready}]}  # fmt: skip
    return decode_node(raw)


def test_fresh_heartbeat_changes_nothing_and_rechecks_at_expiry() -> None:
    """Heartbeat 100 s old: no action; look again when it would expire."""
    p = plan_node(node(100), [], {}, now=NOW, timeout=TIMEOUT)
    assert not p.mark_unschedulable and p.fail_vmis == ()
    assert p.requeue_after == 201.0


def test_no_heartbeat_is_not_a_handler_node() -> None:
    """A node that never ran a handler is not judged."""
    p = plan_node(
        node(None, None),
        [make_vmi(phase=VMIPhase.RUNNING, node="node01")],
        {},
        now=NOW,
        timeout=TIMEOUT,
    )
    assert p == type(p)()


def test_stale_heartbeat_marks_unschedulable_and_fails_vmis_without_pods() -> None:
    """Heartbeat past the timeout: label false; the VMI whose pod is gone fails."""
    orphan = make_vmi(phase=VMIPhase.RUNNING, node="node01", uid="u1")
    alive = make_vmi(phase=VMIPhase.RUNNING, node="node01", uid="u2")
    exited = make_vmi(phase=VMIPhase.RUNNING, node="node01", uid="u3")
    pods = {
        "u2": [make_pod(node="node01", phase="Running", vmi_uid="u2")],
        "u3": [make_pod(node="node01", phase="Failed", vmi_uid="u3")],
    }
    p = plan_node(node(TIMEOUT + 5), [orphan, alive, exited], pods, now=NOW, timeout=TIMEOUT)
    assert p.mark_unschedulable
    assert [v.uid for v, _ in p.fail_vmis] == ["u1", "u3"]
    assert "node01" in p.fail_vmis[0][1]


def test_terminating_pod_is_not_gone() -> None:
    """A pod being deleted may still run the guest: its VMI is not failed yet."""
    vmi = make_vmi(phase=VMIPhase.RUNNING, node="node01")
    pods = {VMI_UID: [make_pod(node="node01", phase="Running", deleting=True)]}
    p = plan_node(node(TIMEOUT + 5), [vmi], pods, now=NOW, timeout=TIMEOUT)
    assert p.fail_vmis == ()


def test_already_unschedulable_node_is_not_relabelled_and_final_vmis_are_skipped() -> None:
    """No redundant label write; final VMIs and VMIs of other nodes are left alone."""
    vmis = [
        make_vmi(phase=VMIPhase.FAILED, node="node01"),
        make_vmi(phase=VMIPhase.RUNNING, node="node02"),
    ]
    p = plan_node(node(TIMEOUT + 5, "false"), vmis, {}, now=NOW, timeout=TIMEOUT)
    assert not p.mark_unschedulable and p.fail_vmis == ()


def test_malformed_heartbeat_counts_as_none() -> None:
    """A heartbeat that does not parse is ignored, not a crash."""
    raw = {"metadata": {"name": "n", "annotations": {"kubevirt.io/heartbeat": "yesterday"}}}
    assert decode_node(raw).heartbeat is None


def test_decode_reads_ready_and_the_out_of_service_taint() -> None:
    """Ready True/False/Unknown and no condition; out-of-service taint = fenced."""
    assert node(1, ready="True").ready is True
    assert node(1, ready="Unknown").ready is False
    assert node(1, ready="False").ready is False
    assert node(1).ready is None
    assert node(1, taints=("node.kubernetes.io/out-of-service",)).fenced
    assert not node(1, taints=("node.kubernetes.io/unreachable",)).fenced


def test_dead_node_releases_terminating_pods_but_not_running_ones() -> None:
    """Heartbeat stale and the Node not Ready: a VMI whose pod is being deleted fails (its
    kubelet will never report the end); one whose pod the API still shows Running does not
    (the node may only be cut off: never two guests)."""
    evicted = make_vmi(phase=VMIPhase.RUNNING, node="node01", uid="u1")
    cut_off = make_vmi(phase=VMIPhase.RUNNING, node="node01", uid="u2")
    pods = {
        "u1": [make_pod(node="node01", phase="Running", vmi_uid="u1", deleting=True)],
        "u2": [make_pod(node="node01", phase="Running", vmi_uid="u2")],
    }
    dead = node(TIMEOUT + 5, ready="Unknown")
    p = plan_node(dead, [evicted, cut_off], pods, now=NOW, timeout=TIMEOUT)
    assert [v.uid for v, _ in p.fail_vmis] == ["u1"]
    assert "not Ready" in p.fail_vmis[0][1]


def test_ready_node_or_fresh_heartbeat_keeps_terminating_pods() -> None:
    """A terminating pod holds its VMI while the kubelet is Ready (stale handler only) or
    the handler still heartbeats (NotReady only): either may still stop the guest."""
    vmi = make_vmi(phase=VMIPhase.RUNNING, node="node01")
    pods = {VMI_UID: [make_pod(node="node01", phase="Running", deleting=True)]}
    for n in (node(TIMEOUT + 5, ready="True"), node(10, ready="Unknown")):
        assert plan_node(n, [vmi], pods, now=NOW, timeout=TIMEOUT).fail_vmis == ()


def test_fenced_dead_node_releases_every_pod() -> None:
    """out-of-service taint (an admin says it is powered off) on a dead node: the VMI fails
    though its pod still shows Running; on a Ready node the taint alone does not."""
    vmi = make_vmi(phase=VMIPhase.RUNNING, node="node01")
    pods = {VMI_UID: [make_pod(node="node01", phase="Running")]}
    fence = ("node.kubernetes.io/out-of-service",)
    dead = node(TIMEOUT + 5, ready="False", taints=fence)
    (failed,) = plan_node(dead, [vmi], pods, now=NOW, timeout=TIMEOUT).fail_vmis
    assert "fenced" in failed[1]
    ready = node(TIMEOUT + 5, ready="True", taints=fence)
    assert plan_node(ready, [vmi], pods, now=NOW, timeout=TIMEOUT).fail_vmis == ()
