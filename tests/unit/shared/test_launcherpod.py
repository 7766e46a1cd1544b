"""The compact pod view the informer caches: what it keeps from a raw pod."""

from __future__ import annotations

from shared.launcherpod import PodPhase, decode_pod
from tests.unit.controller.builders import MIG_UID, VMI_UID, ago, pod_dict, unschedulable


def test_decodes_identity_labels_and_node() -> None:
    """Name, UID, VMI UID (created-by), migration UID and node come from the raw pod."""
    pod = decode_pod(pod_dict(node="node01", phase="Running", migration_uid=MIG_UID))
    assert (pod.key, pod.uid, pod.vmi_uid, pod.migration_uid) == (
        "ns/virt-launcher-vm1-abcde",
        "pod-1",
        VMI_UID,
        MIG_UID,
    )
    assert pod.phase == PodPhase.RUNNING and pod.running_on_node and pod.is_migration_target


def test_unschedulable_condition_keeps_the_schedulers_message() -> None:
    """PodScheduled=False/Unschedulable → the message and since when."""
    pod = decode_pod(pod_dict(conditions=unschedulable(ago(30), "0/2 nodes: no kvm")))
    assert pod.unschedulable == "0/2 nodes: no kvm"
    assert pod.unschedulable_since == ago(30)


def test_failure_names_the_compute_containers_exit() -> None:
    """A Failed pod says how compute ended."""
    statuses = [
        {
            "name": "compute",
            "state": {"terminated": {"exitCode": 3, "reason": "Error", "message": "no libvirtd"}},
        }
    ]
    pod = decode_pod(pod_dict(phase="Failed", container_statuses=statuses))
    assert pod.terminal and pod.gone_or_going
    assert pod.describe_failure() == (
        "launcher pod virt-launcher-vm1-abcde failed: compute exited 3 (Error): no libvirtd"
    )


def test_compute_terminated_in_a_running_pod_is_a_dead_launcher() -> None:
    """compute ended while the pod still runs (other containers live on): launcher down,
    and the pod says how compute ended; a running compute is not down."""
    statuses = [{"name": "compute", "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]
    pod = decode_pod(pod_dict(node="node01", phase="Running", container_statuses=statuses))
    assert pod.launcher_down and not pod.terminal
    assert pod.failure == "compute exited 137 (Error)"
    running = [{"name": "compute", "state": {"running": {"startedAt": ago(5)}}}]
    alive = decode_pod(pod_dict(node="node01", phase="Running", container_statuses=running))
    assert not alive.launcher_down and alive.failure is None
    assert decode_pod(pod_dict(phase="Succeeded")).launcher_down


def test_pod_level_reason_when_no_container_ended() -> None:
    """Evictions say so at the pod level."""
    raw = pod_dict(phase="Failed")
    raw["status"].update(reason="Evicted", message="node low on memory")
    assert decode_pod(raw).failure == "Evicted: node low on memory"


def test_unknown_phase_and_deletion() -> None:
    """An unexpected phase decodes as Unknown; deletionTimestamp marks deleting."""
    raw = pod_dict(deleting=True)
    raw["status"]["phase"] = "Weird"
    pod = decode_pod(raw)
    assert pod.phase == PodPhase.UNKNOWN and pod.deleting and pod.gone_or_going
    assert not pod.running_on_node
