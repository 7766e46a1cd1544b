"""VMI decisions: the phase path to the handoff, failures, deletion, and after the handoff."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from controller.vmi.logic import plan_vmi
from controller.vmi.plan import FailureReason, VMIPlan
from shared.launcherpod import LauncherPod, PodPhase, decode_pod
from shared.model import MigrationState, VirtualMachineInstance, VMIPhase
from tests.unit.controller.builders import (
    NOW,
    ago,
    condition,
    make_pod,
    make_vmi,
    pod_dict,
    unschedulable,
    vmi_dict,
)

TIMEOUT = 60.0


def plan(vmi: VirtualMachineInstance, pods: list[LauncherPod] | None = None) -> VMIPlan:
    return plan_vmi(vmi, pods or [], now=NOW, unschedulable_timeout=TIMEOUT)


def phases(p: VMIPlan) -> list[str | None]:
    return [t.phase for t in p.status.phase_transition_timestamps]


def test_new_vmi_creates_a_pod_and_goes_pending_then_scheduling_at_once() -> None:
    """No pod: create one; the status moves "" → Pending → Scheduling in one write."""
    p = plan(make_vmi())
    assert p.create_pod
    assert p.status.phase == VMIPhase.SCHEDULING
    assert phases(p) == ["Pending", "Scheduling"]
    assert p.finalizer is None and not p.labels


def test_pending_pod_keeps_scheduling_without_changes() -> None:
    """A pod not yet running changes nothing (so no write)."""
    vmi = plan(make_vmi()).status
    again = plan(make_vmi(phase=VMIPhase.SCHEDULING), [make_pod(node="node01")])
    assert not again.create_pod and again.status == make_vmi(phase=VMIPhase.SCHEDULING).status
    assert vmi.phase == VMIPhase.SCHEDULING


def test_pod_found_after_a_crash_before_the_status_write() -> None:
    """Phase "" but the pod exists (controller died after creating it): no second pod."""
    p = plan(make_vmi(), [make_pod()])
    assert not p.create_pod and p.status.phase == VMIPhase.SCHEDULING


def test_running_pod_hands_the_vmi_to_its_node() -> None:
    """Scheduled: nodeName, activePods, the node label and the finalizer, in one plan."""
    vmi = make_vmi(phase=VMIPhase.SCHEDULING)
    p = plan(vmi, [make_pod(node="node02", phase="Running", uid="pod-9")])
    assert p.status.phase == VMIPhase.SCHEDULED
    assert p.status.node_name == "node02"
    assert dict(p.status.active_pods) == {"pod-9": "node02"}
    assert p.labels == {"kubevirt.io/nodeName": "node02"}
    assert p.finalizer is True
    assert phases(p)[-1] == "Scheduled"


def test_invalid_vmi_fails_naming_every_field_and_creates_no_pod() -> None:
    """Invalid spec: Failed, reason InvalidSpec, the condition lists the field paths."""
    raw = vmi_dict()
    raw["spec"]["domain"]["memory"] = {}
    raw["spec"]["domain"]["cpu"] = {"cores": 0}
    p = plan(make_vmi(raw=raw))
    assert not p.create_pod
    assert p.status.phase == VMIPhase.FAILED and p.status.reason == FailureReason.INVALID_SPEC
    cond = p.status.condition("Synchronized")
    assert cond is not None and cond.status == "False" and cond.reason == "InvalidSpec"
    assert "spec.domain.cpu.cores" in (cond.message or "")
    assert "spec.domain.resources.requests.memory" in (cond.message or "")


@pytest.mark.parametrize(
    ("pod_kw", "reason"),
    [
        pytest.param({"phase": "Failed"}, FailureReason.POD_FAILED, id="pod-failed"),
        pytest.param({"phase": "Succeeded"}, FailureReason.POD_FAILED, id="pod-exited"),
        pytest.param({"deleting": True}, FailureReason.POD_TERMINATING, id="pod-deleted"),
    ],
)
def test_pod_ending_before_the_handoff_fails_the_vmi(
    pod_kw: dict[str, object], reason: FailureReason
) -> None:
    """Before Scheduled, a pod that ends or is deleted fails the VMI with the reason."""
    p = plan(make_vmi(phase=VMIPhase.SCHEDULING), [make_pod(**pod_kw)])
    assert p.status.phase == VMIPhase.FAILED and p.status.reason == reason
    assert not p.create_pod


def test_pod_vanishing_while_scheduling_fails_the_vmi() -> None:
    """Scheduling with no pod at all (someone deleted it): Failed, no new pod."""
    p = plan(make_vmi(phase=VMIPhase.SCHEDULING))
    assert p.status.phase == VMIPhase.FAILED and p.status.reason == FailureReason.POD_NOT_EXISTS
    assert not p.create_pod


REFUSAL = "Pod was rejected: Allocate failed due to requested number of devices unavailable"


def _rejected(name: str, *, uid: str, created: str, started: bool = False) -> LauncherPod:
    raw = pod_dict(name, uid=uid, phase="Failed", node="node01", created=created)
    raw["status"].update(reason="UnexpectedAdmissionError", message=REFUSAL)
    if started:
        raw["status"]["containerStatuses"] = [{"name": "compute", "state": {"terminated": {}}}]
    return decode_pod(raw)


def test_a_pod_refused_by_its_kubelet_is_replaced_after_a_backoff() -> None:
    """A launcher pod the kubelet refused at admission (a device plugin not registered
    again after a kubelet restart) never ran: the VMI stays Scheduling with
    Synchronized=False/PodRejected, and another pod is made once 2 s have passed."""
    vmi = make_vmi(phase=VMIPhase.SCHEDULING)
    early = plan(vmi, [_rejected("a", uid="a", created=ago(1))])
    assert early.status.phase == VMIPhase.SCHEDULING and not early.create_pod
    assert early.requeue_after == pytest.approx(1.0)
    cond = early.status.condition("Synchronized")
    assert cond is not None and cond.reason == FailureReason.POD_REJECTED
    assert REFUSAL in (cond.message or "")
    later = plan(vmi, [_rejected("a", uid="a", created=ago(3))])
    assert later.create_pod and later.status.phase == VMIPhase.SCHEDULING
    assert later.pod_attempt == 1  # another name than the refused pod's
    waiting = make_vmi(
        phase=VMIPhase.SCHEDULING,
        conditions=(condition("Synchronized", "False", reason="PodRejected"),),
    )
    running = make_pod(uid="b", node="node01", phase="Running")
    second = plan(waiting, [_rejected("a", uid="a", created=ago(9)), running])
    assert second.status.phase == VMIPhase.SCHEDULED
    assert second.status.condition("Synchronized") is None
    assert dict(second.status.active_pods) == {"b": "node01"}


def test_the_fifth_refused_pod_fails_the_vmi_and_a_pod_that_ran_is_no_refusal() -> None:
    """Five refusals: Failed/PodFailed saying so. A pod that started a container and
    failed is a failure at once, whatever its reason."""
    vmi = make_vmi(phase=VMIPhase.SCHEDULING)
    five = [_rejected(f"p{i}", uid=f"p{i}", created=ago(60 - i)) for i in range(5)]
    p = plan(vmi, five)
    assert p.status.phase == VMIPhase.FAILED and p.status.reason == FailureReason.POD_FAILED
    assert not p.create_pod
    ran = plan(vmi, [_rejected("a", uid="a", created=ago(9), started=True)])
    assert ran.status.phase == VMIPhase.FAILED and not ran.create_pod


def test_unschedulable_pod_is_mirrored_then_fails_after_the_timeout() -> None:
    """PodScheduled=False is mirrored with the scheduler's message; past the timeout: Failed."""
    vmi = make_vmi(phase=VMIPhase.SCHEDULING)
    young = make_pod(conditions=unschedulable(ago(10), "0/2 nodes are available: no kvm"))
    p = plan(vmi, [young])
    cond = p.status.condition("PodScheduled")
    assert p.status.phase == VMIPhase.SCHEDULING
    assert cond is not None and cond.reason == "Unschedulable"
    assert cond.message == "0/2 nodes are available: no kvm"
    assert p.requeue_after == pytest.approx(TIMEOUT - 10)
    old = make_pod(conditions=unschedulable(ago(TIMEOUT + 1), "0/2 nodes are available: no kvm"))
    p = plan(vmi, [old])
    assert p.status.phase == VMIPhase.FAILED and p.status.reason == FailureReason.UNSCHEDULABLE
    assert "0/2 nodes are available: no kvm" in (p.status.condition("Synchronized").message or "")  # type: ignore[union-attr]
    assert p.delete_pods == (old,)


def test_an_unschedulable_vsock_pod_says_what_the_node_lacks() -> None:
    """The scheduler naming devices.kubevirt.io/vhost-vsock: the mirrored condition adds
    that autoattachVSOCK needs /dev/vhost-vsock (the vhost_vsock module)."""
    message = "0/2 nodes are available: 2 Insufficient devices.kubevirt.io/vhost-vsock."
    pod = make_pod(conditions=unschedulable(ago(10), message))
    cond = plan(make_vmi(phase=VMIPhase.SCHEDULING), [pod]).status.condition("PodScheduled")
    assert cond is not None and cond.message == (
        f"{message}; autoattachVSOCK needs /dev/vhost-vsock on the node (module vhost_vsock)"
    )


def test_second_launcher_pod_is_deleted() -> None:
    """Should two launcher pods ever exist, the newer one goes."""
    first = make_pod(uid="a", name="virt-launcher-vm1-aaaaa", created=ago(20))
    second = make_pod(uid="b", name="virt-launcher-vm1-bbbbb", created=ago(5))
    p = plan(make_vmi(phase=VMIPhase.SCHEDULING), [second, first])
    assert p.delete_pods == (second,)


def test_migration_target_pods_do_not_count_as_launchers() -> None:
    """A target pod (migrationJobUID) is not the VMI's launcher pod."""
    p = plan(make_vmi(), [make_pod(migration_uid="m")])
    assert p.create_pod


def test_deleted_vmi_deletes_its_pods_and_keeps_the_finalizer_until_they_are_gone() -> None:
    """Deletion: delete every pod; the finalizer stays while any pod remains."""
    live = make_pod(node="node01", phase="Running")
    p = plan(make_vmi(phase=VMIPhase.RUNNING, node="node01", deleting=True), [live])
    assert p.delete_pods == (live,) and p.finalizer is True
    going = make_pod(node="node01", phase="Running", deleting=True)
    p = plan(make_vmi(phase=VMIPhase.RUNNING, node="node01", deleting=True), [going])
    assert p.delete_pods == () and p.finalizer is True
    p = plan(make_vmi(phase=VMIPhase.RUNNING, node="node01", deleting=True), [])
    assert p.finalizer is False


def test_pods_released_by_a_dead_node_do_not_hold_the_finalizer() -> None:
    """A pod on a dead node known stopped (`released`) still listed by the API: a deleted
    or failed VMI drops its finalizer anyway, so its VM can start a new one; a pod not
    released keeps it."""
    stuck = make_pod(node="node01", phase="Running", deleting=True, uid="stuck")
    deleted = make_vmi(phase=VMIPhase.FAILED, node="node01", deleting=True)
    assert plan_vmi(deleted, [stuck], now=NOW, unschedulable_timeout=300).finalizer is True
    p = plan_vmi(
        deleted, [stuck], now=NOW, unschedulable_timeout=300, released=frozenset({"stuck"})
    )
    assert p.finalizer is False and p.delete_pods == ()
    failed = make_vmi(phase=VMIPhase.FAILED, node="node01")
    p = plan_vmi(failed, [stuck], now=NOW, unschedulable_timeout=300, released=frozenset({"stuck"}))
    assert p.finalizer is False


def test_final_vmi_stops_live_pods_and_keeps_terminal_ones() -> None:
    """Failed/Succeeded: live pods are deleted, terminal ones kept for their logs."""
    live = make_pod(node="node01", phase="Running", uid="a")
    done = make_pod(node="node01", phase="Succeeded", uid="b")
    p = plan(make_vmi(phase=VMIPhase.FAILED), [live, done])
    assert p.delete_pods == (live,) and p.finalizer is True
    p = plan(make_vmi(phase=VMIPhase.SUCCEEDED), [done])
    assert p.delete_pods == () and p.finalizer is False


def test_after_handoff_the_controller_only_keeps_bookkeeping() -> None:
    """Running: activePods follows the pods, the label follows nodeName, phase untouched."""
    source = make_pod(node="node01", phase="Running", uid="src")
    target = make_pod(node="node02", phase="Running", uid="tgt", migration_uid="m")
    vmi = make_vmi(phase=VMIPhase.RUNNING, node="node01", active_pods={"src": "node01"})
    p = plan(vmi, [source, target])
    assert p.status.phase == VMIPhase.RUNNING
    assert dict(p.status.active_pods) == {"src": "node01", "tgt": "node02"}
    assert p.labels == {"kubevirt.io/nodeName": "node01"} and p.finalizer is True


KILLED = [{"name": "compute", "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]


@pytest.mark.parametrize(
    ("pods", "names"),
    [
        pytest.param(
            [make_pod(node="node01", phase="Failed", uid="x", container_statuses=KILLED)],
            "launcher pod virt-launcher-vm1-abcde failed: compute exited 137 (Error)",
            id="pod-failed",
        ),
        pytest.param(
            [make_pod(node="node01", phase="Succeeded", uid="x")],
            "launcher pod virt-launcher-vm1-abcde ended in phase Succeeded",
            id="pod-succeeded",
        ),
        pytest.param(
            [make_pod(node="node01", phase="Running", uid="x", container_statuses=KILLED)],
            "launcher pod virt-launcher-vm1-abcde failed: compute exited 137 (Error)",
            id="compute-terminated-pod-running",
        ),
        pytest.param([], "virt-launcher pod x on node node01 no longer exists", id="pod-gone"),
    ],
)
@pytest.mark.parametrize("phase", [VMIPhase.SCHEDULED, VMIPhase.RUNNING])
def test_after_handoff_a_dead_launcher_fails_the_vmi(
    pods: list[LauncherPod], names: str, phase: VMIPhase
) -> None:
    """The launcher pod on the VMI's node is terminal, its compute container terminated,
    or it is gone: Failed(LauncherDied) in one write, the message naming the pod, Ready
    False, the live-guest conditions dropped, activePods kept as they were."""
    vmi = make_vmi(
        phase=phase,
        node="node01",
        active_pods={"x": "node01"},
        conditions=(condition("Ready"), condition("AgentConnected"), condition("Paused")),
    )
    p = plan(vmi, pods)
    assert (p.status.phase, p.status.reason) == (VMIPhase.FAILED, "LauncherDied")
    assert phases(p)[-1] == "Failed"
    sync = p.status.condition("Synchronized")
    assert sync is not None and sync.reason == "LauncherDied" and sync.message == names
    ready = p.status.condition("Ready")
    assert ready is not None and (ready.status, ready.reason) == ("False", "GuestNotRunning")
    assert p.status.condition("AgentConnected") is None and p.status.condition("Paused") is None
    assert dict(p.status.active_pods) == {"x": "node01"}
    assert not p.create_pod and not p.delete_pods and p.finalizer is True
    again = plan(dataclasses.replace(vmi, status=p.status), pods)
    assert again.status == p.status  # final: never planned again


def test_a_pod_being_deleted_is_a_graceful_shutdown_left_to_the_handler() -> None:
    """The launcher pod is deleting but still running (ACPI in progress): no verdict."""
    going = make_pod(node="node01", phase="Running", uid="x", deleting=True)
    vmi = make_vmi(phase=VMIPhase.RUNNING, node="node01", active_pods={"x": "node01"})
    assert plan(vmi, [going]).status.phase == VMIPhase.RUNNING


def test_an_old_dead_pod_beside_the_live_launcher_is_not_a_death() -> None:
    """Migrated away and back: the earlier pod on this node ended, the current one runs."""
    old = make_pod(node="node01", phase="Succeeded", uid="old", created=ago(600))
    live = make_pod(node="node01", phase="Running", uid="new", migration_uid="m2")
    vmi = make_vmi(phase=VMIPhase.RUNNING, node="node01", active_pods={"new": "node01"})
    p = plan(vmi, [old, live])
    assert p.status.phase == VMIPhase.RUNNING and dict(p.status.active_pods) == {"new": "node01"}


def test_a_failing_migration_target_pod_does_not_fail_the_vmi() -> None:
    """During a migration the target pod on the other node dies: the guest runs on."""
    source = make_pod(node="node01", phase="Running", uid="src")
    target = make_pod(
        node="node02", phase="Failed", uid="tgt", migration_uid="m", container_statuses=KILLED
    )
    state = MigrationState(source_node="node01", target_node="node02", migration_uid="m")
    vmi = make_vmi(
        phase=VMIPhase.RUNNING,
        node="node01",
        active_pods={"src": "node01", "tgt": "node02"},
        migration_state=state,
    )
    p = plan(vmi, [source, target])
    assert p.status.phase == VMIPhase.RUNNING and dict(p.status.active_pods) == {"src": "node01"}


def test_the_source_pod_ending_after_a_completed_migration_is_the_hand_off() -> None:
    """Migration completed, nodeName not yet moved: the source launcher exits (its pod
    Succeeded) while the target runs the guest: no verdict. The target pod dying then is
    the VMI's death."""
    source = make_pod(node="node01", phase="Succeeded", uid="src")
    target = make_pod(node="node02", phase="Running", uid="tgt", migration_uid="m")
    state = MigrationState(
        source_node="node01", target_node="node02", migration_uid="m", completed=True
    )
    vmi = make_vmi(
        phase=VMIPhase.RUNNING,
        node="node01",
        active_pods={"src": "node01", "tgt": "node02"},
        migration_state=state,
    )
    assert plan(vmi, [source, target]).status.phase == VMIPhase.RUNNING
    dead = dataclasses.replace(target, phase=PodPhase.FAILED)
    p = plan(vmi, [source, dead])
    assert (p.status.phase, p.status.reason) == (VMIPhase.FAILED, "LauncherDied")


def test_a_dead_handlers_node_is_left_to_the_node_controller() -> None:
    """handler_down: the node controller fails the VMI (NodeUnresponsive), not this one."""
    vmi = make_vmi(phase=VMIPhase.RUNNING, node="node01", active_pods={"x": "node01"})
    p = plan_vmi(vmi, [], now=NOW, unschedulable_timeout=TIMEOUT, handler_down=True)
    assert p.status.phase == VMIPhase.RUNNING


def test_steady_state_after_handoff_is_a_fixed_point() -> None:
    """Re-planning a handed-off VMI whose bookkeeping is right changes nothing."""
    pod = make_pod(node="node01", phase="Running", uid="p")
    vmi = make_vmi(phase=VMIPhase.RUNNING, node="node01", active_pods={"p": "node01"})
    assert plan(vmi, [pod]).status == vmi.status


def test_replanning_the_same_state_is_a_fixed_point() -> None:
    """Applying a plan's status and planning again yields the same status (no second write)."""
    vmi = make_vmi()
    first = plan(vmi)
    second = plan(dataclasses.replace(vmi, status=first.status), [make_pod()])
    assert second.status == first.status


def test_unknown_phase_is_left_alone() -> None:
    """Unknown belongs to the handler."""
    vmi = make_vmi(phase=VMIPhase.UNKNOWN)
    p = plan(vmi, [make_pod(node="n")])
    assert p.status == vmi.status and not p.create_pod and not p.delete_pods


def _networked(**kw: Any) -> VirtualMachineInstance:
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"]["interfaces"] = [
        {"name": "default", "masquerade": {}, "macAddress": "02:00:00:00:00:01"}
    ]
    raw["spec"]["networks"] = [{"name": "default", "pod": {}}]
    return make_vmi(raw=raw, **kw)


def test_handoff_reports_the_pod_ip_on_pod_network_interfaces() -> None:
    """Scheduled carries status.interfaces with the launcher pod's IP (masquerade NATs
    the guest behind it), in the same write; without a pod IP yet, nothing is invented."""
    pod = dataclasses.replace(make_pod(node="node01", phase="Running", uid="p"), ip="10.1.2.3")
    p = plan(_networked(phase=VMIPhase.SCHEDULING), [pod])
    (iface,) = p.status.interfaces
    assert (iface.name, iface.ip_address, iface.mac) == ("default", "10.1.2.3", "02:00:00:00:00:01")
    assert iface.ip_addresses == ("10.1.2.3",)
    bare = plan(_networked(phase=VMIPhase.SCHEDULING), [dataclasses.replace(pod, ip=None)])
    assert bare.status.interfaces == ()


def test_after_a_migration_the_interfaces_follow_the_target_pod_ip() -> None:
    """Once nodeName names the target, the IP becomes the target pod's; steady afterwards."""
    src = dataclasses.replace(make_pod(node="node01", phase="Running", uid="s"), ip="10.0.0.1")
    tgt = dataclasses.replace(
        make_pod(node="node02", phase="Running", uid="t", migration_uid="m"), ip="10.0.0.2"
    )
    handed = plan(_networked(phase=VMIPhase.SCHEDULING), [src]).status
    moved = dataclasses.replace(handed, node_name="node02", phase=VMIPhase.RUNNING)
    vmi = dataclasses.replace(_networked(), status=moved)
    p = plan(vmi, [dataclasses.replace(src, phase=PodPhase.SUCCEEDED), tgt])
    assert [i.ip_address for i in p.status.interfaces] == ["10.0.0.2"]
    again = dataclasses.replace(vmi, status=p.status)
    assert plan(again, [tgt]).status == p.status
