"""VMI decisions: (VMI, its launcher pods, now) → what to create, delete and write.

Pure functions; the VMI controller applies the plan. The controller owns a VMI until it
is handed to the handler of its node:

    "" → Pending → Scheduling (pod created) → Scheduled (pod Running on a node) → handler
          └──────────────┴────────────────────→ Failed (invalid spec, pod failed or gone,
                                                         unschedulable for too long)

A launcher pod its kubelet refused at admission never ran (after a kubelet restart the
device plugins register again a few seconds late): it is replaced after a backoff, as a
ReplicaSet replaces its failed pods, and only the fifth refusal fails the VMI. A pod the
kubelet cannot start for a device is replaced the same way after a grace (blocked.py).

From Scheduled on, the handler owns the phase; the controller keeps the finalizer, the
node label and activePods true, and fails the VMI when its launcher is dead: the launcher
pod on the node the guest runs on is terminal, its compute container terminated, or it is
gone (KubeVirt's VMI controller does the same for pods that are down). The handler sees
the same death through the launcher's socket; both write reason LauncherDied, and the
first write wins: the phase only moves forward, and a final VMI is never planned again.
Deletion and final phases delete the pods, and the finalizer goes once they are gone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from controller.transitions import vmi_condition, with_phases
from controller.vmi.blocked import (
    blocked_start,
    plan_after_rejection,
    plan_blocked,
    superseded,
)
from controller.vmi.plan import FailureReason, VMIPlan, failed, parse_or
from controller.vmi.probes import with_probe_readiness
from controller.vmi.receiver import plan_decentral
from shared import podlayout
from shared.labels import NODE_NAME_LABEL, POD_SCHEDULED, UNSCHEDULABLE_REASON, VSOCK_RESOURCE
from shared.launcherpod import (
    COMPUTE_CONTAINER,
    IMAGE_PULL_REASONS,
    ImagePullFailure,
    LauncherPod,
)
from shared.model import (
    ConditionReason,
    ConditionStatus,
    FieldError,
    VirtualMachineInstance,
    VMIConditionType,
    VMIPhase,
    VMIStatus,
)
from shared.model.validation import validate_vmi

PRE_HANDOFF = frozenset({VMIPhase.UNSET, VMIPhase.PENDING, VMIPhase.SCHEDULING})
POST_HANDOFF = frozenset({VMIPhase.SCHEDULED, VMIPhase.RUNNING})


def plan_vmi(
    vmi: VirtualMachineInstance,
    pods: Sequence[LauncherPod],
    *,
    now: datetime,
    unschedulable_timeout: float,
    handler_down: bool = False,
    released: frozenset[str] = frozenset(),
) -> VMIPlan:
    """The plan for one VMI given every pod labelled with its UID. `handler_down`: the
    handler of the VMI's node stopped heartbeating, so the node controller judges its
    pods (it fails the VMI as NodeUnresponsive once the pod is gone). `released`: UIDs of
    pods on dead nodes known stopped though the API still lists them (node_logic.py's
    rule): they no longer hold a final or deleted VMI's finalizer."""
    phase = vmi.status.phase_or_unset
    if vmi.metadata.is_deleting or phase.is_final():
        return _plan_teardown(vmi, pods, released)
    if (decentral := plan_decentral(vmi, pods, now=now)) is not None:
        return decentral
    if phase in PRE_HANDOFF:
        return _plan_pre_handoff(vmi, pods, now=now, timeout=unschedulable_timeout)
    if phase in POST_HANDOFF:
        dead = None if handler_down else dead_launcher(vmi, pods)
        if dead is not None:
            return VMIPlan(status=launcher_died(vmi.status, dead, now), finalizer=True)
        return _plan_post_handoff(vmi, pods, now=now)
    return VMIPlan(status=vmi.status)


def describe_field_errors(errors: Sequence[FieldError]) -> str:
    """ "invalid spec: spec.a: must …; spec.b: …" — every field named."""
    return "invalid spec: " + "; ".join(str(e) for e in errors)


# ---- deletion and final phases --------------------------------------------------------


def _plan_teardown(
    vmi: VirtualMachineInstance, pods: Sequence[LauncherPod], released: frozenset[str]
) -> VMIPlan:
    """Delete what still runs; drop the finalizer once nothing does.

    A deleted VMI takes all its pods with it; a final one only those still running
    (terminal pods stay for their logs until the VMI itself goes). A pod on a dead node
    that will never report its end (`released`) does not keep the finalizer: else the VM
    of a VMI failed by its node's death could never start it again.
    """
    if vmi.metadata.is_deleting:
        doomed = tuple(p for p in pods if not p.deleting)
        remaining = [p for p in pods if p.uid not in released]
    else:
        doomed = tuple(p for p in pods if not p.gone_or_going)
        remaining = [p for p in pods if not p.terminal and p.uid not in released]
    return VMIPlan(status=vmi.status, delete_pods=doomed, finalizer=bool(remaining))


# ---- before the handoff ---------------------------------------------------------------


def _plan_pre_handoff(
    vmi: VirtualMachineInstance, pods: Sequence[LauncherPod], *, now: datetime, timeout: float
) -> VMIPlan:
    launchers = sorted(
        (p for p in pods if not p.is_migration_target), key=lambda p: (p.created or "", p.name)
    )
    rejected = [p for p in launchers if p.rejected]
    launchers = [p for p in launchers if not p.rejected and not superseded(p, launchers)]
    if not launchers:
        return _plan_no_pod(vmi, rejected, now=now)
    # Never two launcher pods: should one ever appear, the newer ones go.
    extra = tuple(p for p in launchers[1:] if not p.deleting)
    pod = launchers[0]
    if pod.gone_or_going:
        reason = FailureReason.POD_TERMINATING if pod.deleting else FailureReason.POD_FAILED
        status = failed(vmi.status, reason, pod.describe_failure(), now)
        return VMIPlan(status=status, delete_pods=extra)
    scheduling = with_phases(vmi.status, [VMIPhase.PENDING, VMIPhase.SCHEDULING], now)
    if pod.unschedulable is not None:
        return _plan_unschedulable(scheduling, pod, extra, now=now, timeout=timeout)
    scheduling = scheduling.without_condition(POD_SCHEDULED)
    if _synchronized_reason(scheduling) == FailureReason.POD_REJECTED:
        scheduling = scheduling.without_condition(VMIConditionType.SYNCHRONIZED)
    scheduling = with_image_pull(scheduling, vmi, pod.image_pull, now=now)
    if (blocked := blocked_start(pod, rejected, now=now)) is not None:
        return plan_blocked(vmi, scheduling, (pod, *extra), blocked, now=now)
    if pod.running_on_node:
        return _plan_handoff(scheduling, pod, extra, vmi=vmi, now=now)
    return VMIPlan(status=scheduling, delete_pods=extra)


def _plan_no_pod(
    vmi: VirtualMachineInstance, rejected: Sequence[LauncherPod], *, now: datetime
) -> VMIPlan:
    """No launcher pod that may still run: the first (once the spec is validated), or
    the next after kubelets refused the earlier ones."""
    if rejected:
        return plan_after_rejection(vmi, rejected, now=now)
    # Validated once, before its pod exists (a VMI's spec does not change after that).
    errors = validate_vmi(vmi)
    if errors:
        message = describe_field_errors(errors)
        return VMIPlan(status=failed(vmi.status, FailureReason.INVALID_SPEC, message, now))
    return _plan_without_pod(vmi, now)


def _synchronized_reason(status: VMIStatus) -> str | None:
    cond = status.condition(VMIConditionType.SYNCHRONIZED)
    return None if cond is None else cond.reason


def with_image_pull(
    status: VMIStatus,
    vmi: VirtualMachineInstance,
    failure: ImagePullFailure | None,
    *,
    now: datetime,
) -> VMIStatus:
    """Mirror a launcher pod container that cannot get its image onto the VMI as
    Synchronized=False (reason ErrImagePull, ImagePullBackOff, …), naming the VMI field the
    image comes from; drop the condition once the images are there."""
    current = status.condition(VMIConditionType.SYNCHRONIZED)
    if failure is None:
        if current is not None and current.reason in IMAGE_PULL_REASONS:
            return status.without_condition(VMIConditionType.SYNCHRONIZED)
        return status
    source, image = pulled_source(vmi, failure)
    message = f"{source}: image {image!r}: {failure.message}"
    return vmi_condition(
        status,
        VMIConditionType.SYNCHRONIZED,
        ConditionStatus.FALSE,
        reason=failure.reason,
        message=message.rstrip(": "),
        now=now,
    )


def pulled_source(vmi: VirtualMachineInstance, failure: ImagePullFailure) -> tuple[str, str]:
    """The VMI field and image a failed pull is for. An image volume's pull fails on the
    container mounting it (compute), with the kubelet's message quoting the image: the
    containerDisk or kernelBoot image it names; otherwise the init container's."""
    if failure.container == COMPUTE_CONTAINER:
        for field_path, image in _image_sources(vmi):
            if image and f'"{image}"' in failure.message:
                return field_path, image
    return image_field(vmi, failure.container), failure.image


def _image_sources(vmi: VirtualMachineInstance) -> list[tuple[str, str]]:
    found = [
        (f"spec.volumes[{i}].containerDisk.image", v.container_disk.image or "")
        for i, v in enumerate(vmi.spec.volumes)
        if v.container_disk is not None
    ]
    boot = vmi.spec.domain.kernel_boot
    if boot is not None and boot.container is not None:
        found.append(
            ("spec.domain.firmware.kernelBoot.container.image", boot.container.image or "")
        )
    return found


def image_field(vmi: VirtualMachineInstance, container: str) -> str:
    """The VMI field whose image a launcher pod container runs (its init containers copy
    containerDisk and kernelBoot files out of the user's images)."""
    if container == podlayout.KERNEL_BOOT_INIT_CONTAINER:
        return "spec.domain.firmware.kernelBoot.container.image"
    for i, volume in enumerate(vmi.spec.volumes):
        if volume.name and podlayout.volume_init_container(volume.name) == container:
            return f"spec.volumes[{i}].containerDisk.image"
    return f"container {container}"


def _plan_without_pod(vmi: VirtualMachineInstance, now: datetime) -> VMIPlan:
    if vmi.status.phase_or_unset == VMIPhase.SCHEDULING:
        message = "the launcher pod disappeared before the VMI was scheduled"
        return VMIPlan(status=failed(vmi.status, FailureReason.POD_NOT_EXISTS, message, now))
    status = with_phases(vmi.status, [VMIPhase.PENDING, VMIPhase.SCHEDULING], now)
    return VMIPlan(status=status, create_pod=True)


# What a node lacks when the scheduler finds no room for a device resource.
DEVICE_HINTS = {
    VSOCK_RESOURCE: "autoattachVSOCK needs /dev/vhost-vsock on the node (module vhost_vsock)",
}


def _with_device_hints(message: str) -> str:
    """The scheduler's message, with what each device resource it names needs."""
    hints = [hint for resource, hint in DEVICE_HINTS.items() if resource in message]
    return "; ".join([message, *hints]) if hints else message


def _plan_unschedulable(
    status: VMIStatus,
    pod: LauncherPod,
    extra: tuple[LauncherPod, ...],
    *,
    now: datetime,
    timeout: float,
) -> VMIPlan:
    """Mirror PodScheduled=False onto the VMI; fail it once the timeout has passed."""
    message = _with_device_hints(pod.unschedulable or "")
    since = parse_or(pod.unschedulable_since or pod.created, now)
    waited = (now - since).total_seconds()
    if waited >= timeout:
        text = f"launcher pod {pod.name} could not be scheduled: {message}"
        status = status.without_condition(POD_SCHEDULED)
        status = failed(status, FailureReason.UNSCHEDULABLE, text, now)
        return VMIPlan(status=status, delete_pods=(pod, *extra))
    status = vmi_condition(
        status,
        POD_SCHEDULED,
        ConditionStatus.FALSE,
        reason=UNSCHEDULABLE_REASON,
        message=message,
        now=now,
    )
    return VMIPlan(status=status, delete_pods=extra, requeue_after=max(0.5, timeout - waited))


def _plan_handoff(
    status: VMIStatus,
    pod: LauncherPod,
    extra: tuple[LauncherPod, ...],
    *,
    vmi: VirtualMachineInstance,
    now: datetime,
) -> VMIPlan:
    """Scheduled: the node is known; the handler there takes the VMI over."""
    node = pod.node_name or ""
    status = with_phases(status, [VMIPhase.SCHEDULED], now)
    status = dataclasses.replace(status, node_name=node, active_pods={pod.uid: node})
    status = with_pod_ip(status, vmi, pod)
    return VMIPlan(status=status, delete_pods=extra, labels={NODE_NAME_LABEL: node}, finalizer=True)


# ---- after the handoff ----------------------------------------------------------------


def live_node(vmi: VirtualMachineInstance) -> str | None:
    """The node the guest runs on: nodeName, or a completed migration's target (the
    target handler moves nodeName there a moment later)."""
    state = vmi.status.migration_state
    if state is not None and state.completed and state.target_node:
        return state.target_node
    return vmi.status.node_name


def dead_launcher(vmi: VirtualMachineInstance, pods: Sequence[LauncherPod]) -> str | None:
    """Why the VMI's launcher is dead, or None while it lives.

    Its launcher is a pod on the node the guest runs on; it is dead when every such pod
    is down (terminal, or its compute container terminated) or there is none. A pod being
    deleted still runs (a graceful shutdown: the handler judges its end); a migration's
    target pod elsewhere, or the source pod after a completed migration, is not it.
    """
    node = live_node(vmi)
    if not node:
        return None
    here = [p for p in pods if p.node_name == node]
    if any(not p.launcher_down for p in here):
        return None
    if here:
        newest = max(here, key=lambda p: (p.created or "", p.name))
        return newest.describe_failure()
    named = [uid for uid, where in vmi.status.active_pods.items() if where == node]
    which = f"virt-launcher pod {named[0]}" if named else "the virt-launcher pod"
    return f"{which} on node {node} no longer exists"


def launcher_died(status: VMIStatus, message: str, now: datetime) -> VMIStatus:
    """Failed(LauncherDied), Ready=False saying why, the live-guest conditions dropped:
    the handler writes nothing to a final VMI, so the controller leaves it consistent."""
    status = failed(status, FailureReason.LAUNCHER_DIED, message, now)
    status = vmi_condition(
        status,
        VMIConditionType.READY,
        ConditionStatus.FALSE,
        reason=ConditionReason.GUEST_NOT_RUNNING,
        message=message,
        now=now,
    )
    for gone in (VMIConditionType.PAUSED, VMIConditionType.AGENT_CONNECTED):
        status = status.without_condition(gone)
    return status


def _plan_post_handoff(
    vmi: VirtualMachineInstance, pods: Sequence[LauncherPod], *, now: datetime
) -> VMIPlan:
    """Keep activePods, the node label and the finalizer while the launcher lives. Phase
    and the Ready condition are the handler's; a dead handler's VMIs the node controller's."""
    status = vmi.status
    active = {p.uid: p.node_name for p in pods if p.node_name and not p.terminal}
    if dict(status.active_pods) != active:
        status = dataclasses.replace(status, active_pods=active)
    node = status.node_name
    here = [p for p in pods if p.node_name == node and node and not p.gone_or_going]
    if len(here) == 1:  # after a migration: the target pod's IP
        status = with_pod_ip(status, vmi, here[0])
        if vmi.spec.readiness_probe is not None:
            status = with_probe_readiness(status, here[0], now)
    labels: dict[str, str | None] = {NODE_NAME_LABEL: node} if node else {}
    return VMIPlan(status=status, labels=labels, finalizer=True)


def with_pod_ip(status: VMIStatus, vmi: VirtualMachineInstance, pod: LauncherPod) -> VMIStatus:
    """status.interfaces carrying the launcher pod's IP, once it has one. A passt
    interface keeps the address it has: the guest keeps the first pod's IP across
    migrations (the target's passt gives it that one, launcher/passt.py)."""
    if pod.ip is None:
        return status
    current = {i.name: i for i in status.interfaces}
    passt = {i.name for i in vmi.spec.domain.devices.interfaces if i.uses_passt()}
    wanted = tuple(
        current[w.name]
        if w.name in passt and w.name in current and current[w.name].ip_address
        else w
        for w in vmi.interface_statuses(pod_ip=pod.ip, pod_ips=pod.ips)
    )
    if not status.interfaces:
        return dataclasses.replace(status, interfaces=wanted)
    # Only the pod network's addresses are the controller's: secondary NICs come and go
    # with hotplug (the handler's, handler/nichotplug.py).
    on_pod = {w.name: w for w in wanted if w.ip_address}
    if all(n in current and current[n].ip_address == w.ip_address for n, w in on_pod.items()):
        return status
    merged = [
        dataclasses.replace(i, ip_address=w.ip_address, ip_addresses=w.ip_addresses)
        if (w := on_pod.get(i.name)) is not None
        else i
        for i in status.interfaces
    ]
    merged += [w for n, w in on_pod.items() if n not in current]
    return dataclasses.replace(status, interfaces=tuple(merged))
