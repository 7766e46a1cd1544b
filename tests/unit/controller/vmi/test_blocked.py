"""Launcher pods the kubelet cannot start for a device (controller.vmi.blocked): waited
for, then replaced by the next attempt, and the VMI failed with the reason once five
launcher pods could not start; never left Scheduling for good."""

from __future__ import annotations

from controller.config import TemplateConfig
from controller.services.template import TemplateService
from controller.vmi.blocked import MAX_REJECTED_PODS, START_GRACE, next_attempt
from controller.vmi.logic import plan_vmi
from controller.vmi.plan import FailureReason, VMIPlan
from shared.labels import LAUNCHER_ATTEMPT_ANNOTATION
from shared.launcherpod import LauncherPod, decode_pod
from shared.model import VirtualMachineInstance, VMIPhase
from tests.unit.controller.builders import NOW, ago, make_vmi, pod_dict

NO_PLUGIN = "devices.kubevirt.io/tun: no device plugin is registered"


def plan(vmi: VirtualMachineInstance, pods: list[LauncherPod]) -> VMIPlan:
    return plan_vmi(vmi, pods, now=NOW, unschedulable_timeout=600.0)


def blocked(
    name: str, *, created: float, attempt: int = 0, deleting: bool = False, message: str = NO_PLUGIN
) -> LauncherPod:
    waiting = {"reason": "CreateContainerConfigError", "message": message}
    raw = pod_dict(
        name,
        uid=name,
        node="node01",
        created=ago(created),
        deleting=deleting,
        container_statuses=[{"name": "compute", "state": {"waiting": waiting}}],
    )
    if attempt:
        raw["metadata"]["annotations"] = {LAUNCHER_ATTEMPT_ANNOTATION: str(attempt)}
    return decode_pod(raw)


def test_a_blocked_pod_is_decoded_with_its_container_and_reason() -> None:
    """The pod view names the container, the kubelet's reason and its message; a waiting
    reason about something else (a missing ConfigMap) is no device block."""
    pod = blocked("a", created=1, attempt=2)
    assert pod.start_blocked == f"compute: CreateContainerConfigError: {NO_PLUGIN}"
    assert pod.attempt == 2
    other = blocked("b", created=1, message='configmap "x" not found')
    assert other.start_blocked is None


def test_a_blocked_pod_gets_a_grace_then_is_replaced_by_the_next_attempt() -> None:
    """Within the grace the VMI stays Scheduling and is re-checked when it ends; after it
    the pod is deleted, attempt 1 is created, and Synchronized=False/PodRejected says why."""
    vmi = make_vmi(phase=VMIPhase.SCHEDULING)
    early = plan(vmi, [blocked("a", created=5)])
    assert not early.create_pod and early.delete_pods == ()
    assert early.requeue_after is not None and 0 < early.requeue_after <= START_GRACE
    late = plan(vmi, [blocked("a", created=START_GRACE + 1)])
    assert late.create_pod and late.pod_attempt == 1
    assert [p.name for p in late.delete_pods] == ["a"]
    assert late.status.phase == VMIPhase.SCHEDULING
    cond = late.status.condition("Synchronized")
    assert cond is not None and cond.reason == FailureReason.POD_REJECTED
    assert NO_PLUGIN in (cond.message or "")


def test_the_replaced_pod_terminating_is_not_a_pod_failure() -> None:
    """While the replaced pod terminates beside attempt 1, the VMI keeps scheduling on the
    new pod (the old one is superseded, not the launcher gone)."""
    vmi = make_vmi(phase=VMIPhase.SCHEDULING)
    old = blocked("a", created=60, deleting=True)
    new_raw = pod_dict("b", uid="b", created=ago(1))
    new_raw["metadata"]["annotations"] = {LAUNCHER_ATTEMPT_ANNOTATION: "1"}
    new = decode_pod(new_raw)
    p = plan(vmi, [old, new])
    assert p.status.phase == VMIPhase.SCHEDULING
    assert not p.create_pod and p.delete_pods == ()


def test_the_fifth_blocked_launcher_pod_fails_the_vmi_with_the_reason() -> None:
    """Attempt 4 blocked past its grace: the VMI is Failed/PodFailed naming the device
    message, and the pod is deleted; nothing more is created."""
    vmi = make_vmi(phase=VMIPhase.SCHEDULING)
    last = blocked("e", created=START_GRACE + 1, attempt=MAX_REJECTED_PODS - 1)
    p = plan(vmi, [last])
    assert p.status.phase == VMIPhase.FAILED and p.status.reason == FailureReason.POD_FAILED
    assert not p.create_pod and [d.name for d in p.delete_pods] == ["e"]
    cond = p.status.condition("Synchronized")
    assert cond is not None and NO_PLUGIN in (cond.message or "")


def test_attempt_numbers_follow_refused_and_replaced_pods_alike() -> None:
    """The next attempt is past every earlier one, refused at admission or replaced: a
    refused attempt 1 after a replaced attempt 0 is followed by attempt 2, not a clash."""
    refused_raw = pod_dict("r", uid="r", phase="Failed", node="node01", created=ago(60))
    refused_raw["status"].update(reason="UnexpectedAdmissionError", message="no devices")
    refused_raw["metadata"]["annotations"] = {LAUNCHER_ATTEMPT_ANNOTATION: "1"}
    refused = decode_pod(refused_raw)
    assert refused.rejected
    assert next_attempt([refused]) == 2
    p = plan(make_vmi(phase=VMIPhase.SCHEDULING), [refused])
    assert p.create_pod and p.pod_attempt == 2


def test_replacement_pods_carry_their_attempt() -> None:
    """The rendered launcher pod of attempt n > 0 is annotated with n and named apart from
    the first; the first carries no attempt."""
    service = TemplateService(TemplateConfig())
    vmi = make_vmi()
    first = service.launcher_pod(vmi)
    third = service.launcher_pod(vmi, attempt=2)
    assert LAUNCHER_ATTEMPT_ANNOTATION not in first["metadata"]["annotations"]
    assert third["metadata"]["annotations"][LAUNCHER_ATTEMPT_ANNOTATION] == "2"
    assert first["metadata"]["name"] != third["metadata"]["name"]
    assert decode_pod(third).attempt == 2
