"""A compact, typed view of a launcher pod: what the controllers decide by, nothing more.

The pod informer caches these instead of raw pod dicts: a raw pod with managedFields and
full status costs tens of kilobytes of Python objects, this costs a few hundred bytes,
and it is the difference between meeting the memory budget per VMI and not.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.labels import (
    CREATED_BY_LABEL,
    DEVICE_RESOURCE_PREFIX,
    LAUNCHER_ATTEMPT_ANNOTATION,
    MIGRATION_JOB_LABEL,
    POD_SCHEDULED,
    UNSCHEDULABLE_REASON,
)

COMPUTE_CONTAINER = "compute"
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"  # shared/multus.py's
# The compute container's user and group (KubeVirt's qemu, 107; the launcher image has
# it): libvirtd runs in session mode and QEMU as this user. virt-handler gives it what it
# opens (the tap, device nodes, hotplugged disks); the pod's fsGroup its volumes.
LAUNCHER_UID = 107
LAUNCHER_GID = 107
# The kubelet's waiting reasons for an image it cannot get (kubelet/images/types.go).
IMAGE_PULL_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"}
)

# The kubelet's waiting reasons for a container it cannot create; with a message naming a
# device resource (devices.kubevirt.io/…) the node has no device plugin serving it (yet).
START_BLOCKED_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagePullFailure:
    """A container of the pod waits for an image the kubelet cannot get."""

    reason: str  # one of IMAGE_PULL_REASONS
    container: str
    image: str
    message: str


class PodPhase(enum.StrEnum):
    """corev1.PodPhase."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class LauncherPod:
    """One launcher (or migration target) pod as the controllers see it."""

    namespace: str
    name: str
    uid: str
    phase: PodPhase = PodPhase.PENDING
    node_name: str | None = None
    vmi_uid: str | None = None
    # The name of the VMI that owns the pod (its controller reference).
    vmi_name: str | None = None
    migration_uid: str | None = None
    deleting: bool = False
    # The scheduler's message while PodScheduled=False with reason Unschedulable.
    unschedulable: str | None = None
    unschedulable_since: str | None = None
    # The compute container terminated (the launcher is dead even if the pod still runs).
    compute_terminated: bool = False
    # Why a terminal pod or its compute container ended ("compute exited 1 (Error)").
    failure: str | None = None
    created: str | None = None
    ip: str | None = None  # status.podIP, once the pod has one
    ips: tuple[str, ...] = ()  # status.podIPs (a dual-stack pod's IPv4 and IPv6)
    image_pull: ImagePullFailure | None = None
    # Failed because its node's kubelet refused to admit it: none of its containers ran.
    rejected: bool = False
    # The compute container's image (the workload updater compares it with the current one).
    image: str | None = None
    # Which launcher pod of its VMI this is (0: the first; n: it replaced n that never ran).
    attempt: int = 0
    # A container the kubelet cannot create for a device resource ("compute:
    # CreateContainerConfigError: devices.kubevirt.io/tun: no device plugin is registered").
    start_blocked: str | None = None
    # The pod's Ready condition (its containers' readiness probes pass), and why not.
    ready: bool = False
    not_ready_reason: str | None = None
    # Its multus `k8s.v1.cni.cncf.io/networks` annotation (NIC hotplug compares it).
    networks: str | None = None

    @property
    def key(self) -> str:
        """ "namespace/name"."""
        return f"{self.namespace}/{self.name}"

    @property
    def vmi_key(self) -> str | None:
        """ "namespace/name" of the owning VMI, if the pod names one."""
        return f"{self.namespace}/{self.vmi_name}" if self.vmi_name else None

    @property
    def terminal(self) -> bool:
        """Succeeded or Failed: its containers will never run again."""
        return self.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)

    @property
    def gone_or_going(self) -> bool:
        """Terminal or being deleted: it no longer counts as the VMI's live pod."""
        return self.terminal or self.deleting

    @property
    def launcher_down(self) -> bool:
        """Terminal, or its compute container terminated: its launcher will not come back."""
        return self.terminal or self.compute_terminated

    @property
    def is_migration_target(self) -> bool:
        """Created for a VMIM (labelled with its UID)."""
        return self.migration_uid is not None

    @property
    def running_on_node(self) -> bool:
        """Running and bound to a node: a pod the handler can reach."""
        return self.phase == PodPhase.RUNNING and bool(self.node_name) and not self.deleting

    def describe_failure(self) -> str:
        """A one-line reason for a terminal or deleted pod."""
        if self.failure:
            return f"launcher pod {self.name} failed: {self.failure}"
        if self.deleting:
            return f"launcher pod {self.name} was deleted"
        return f"launcher pod {self.name} ended in phase {self.phase}"


def decode_pod(raw: Mapping[str, Any]) -> LauncherPod:
    """The view of a raw pod dict (from a list or a watch event)."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    labels = meta.get("labels") or {}
    unschedulable, since = _unschedulable(status)
    compute_terminated = _compute_state(status).get("terminated") is not None
    ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), None)
    try:
        phase = PodPhase(status.get("phase") or "Pending")
    except ValueError:
        phase = PodPhase.UNKNOWN
    ended = phase in (PodPhase.FAILED, PodPhase.SUCCEEDED)
    return LauncherPod(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        phase=phase,
        node_name=spec.get("nodeName") or None,
        vmi_uid=labels.get(CREATED_BY_LABEL) or None,
        vmi_name=_owner_name(meta),
        migration_uid=labels.get(MIGRATION_JOB_LABEL) or None,
        deleting=meta.get("deletionTimestamp") is not None,
        unschedulable=unschedulable,
        unschedulable_since=since,
        compute_terminated=compute_terminated,
        failure=_failure(status) if ended or compute_terminated else None,
        created=meta.get("creationTimestamp") or None,
        ip=status.get("podIP") or None,
        ips=tuple(str(p["ip"]) for p in status.get("podIPs") or () if p.get("ip")),
        image_pull=_image_pull(status),
        rejected=phase == PodPhase.FAILED and kubelet_rejected(status),
        image=_compute_image(spec),
        attempt=_attempt(meta),
        start_blocked=_start_blocked(status) if phase == PodPhase.PENDING else None,
        ready=ready is not None and ready.get("status") == "True",
        not_ready_reason=(ready or {}).get("reason") or None,
        networks=(meta.get("annotations") or {}).get(NETWORKS_ANNOTATION) or None,
    )


def _attempt(meta: Mapping[str, Any]) -> int:
    value = (meta.get("annotations") or {}).get(LAUNCHER_ATTEMPT_ANNOTATION)
    try:
        return max(int(value), 0) if value is not None else 0
    except ValueError:
        return 0


def _start_blocked(status: Mapping[str, Any]) -> str | None:
    """The first (init) container the kubelet cannot create for a device resource."""
    for cs in (*(status.get("initContainerStatuses") or ()),
               *(status.get("containerStatuses") or ())):  # fmt: skip
        waiting = (cs.get("state") or {}).get("waiting") or {}
        message = str(waiting.get("message") or "")
        if waiting.get("reason") in START_BLOCKED_REASONS and DEVICE_RESOURCE_PREFIX in message:
            return f"{cs.get('name')}: {waiting['reason']}: {message}"
    return None


# Pod status.reason of a pod its kubelet refused at admission (the pod never ran): the
# resource managers' UnexpectedAdmissionError (a device plugin not registered again yet
# after a kubelet restart), "OutOf<resource>", and a node that no longer matches.
KUBELET_REJECTIONS = frozenset({"UnexpectedAdmissionError", "NodeAffinity"})


def kubelet_rejected(status: Mapping[str, Any]) -> bool:
    """Failed at the kubelet's admission, with no container ever started."""
    reason = str(status.get("reason") or "")
    if reason not in KUBELET_REJECTIONS and not reason.startswith("OutOf"):
        return False
    containers = [*(status.get("initContainerStatuses") or ()),
                  *(status.get("containerStatuses") or ())]  # fmt: skip
    return not any((c.get("state") or {}).keys() & {"running", "terminated"} for c in containers)


def _owner_name(meta: Mapping[str, Any]) -> str | None:
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller") and ref.get("kind") == "VirtualMachineInstance":
            return str(ref.get("name") or "") or None
    return None


def _unschedulable(status: Mapping[str, Any]) -> tuple[str | None, str | None]:
    for cond in status.get("conditions") or ():
        if (
            cond.get("type") == POD_SCHEDULED
            and cond.get("status") == "False"
            and cond.get("reason") == UNSCHEDULABLE_REASON
        ):
            message = str(cond.get("message") or "the scheduler found no node")
            return message, cond.get("lastTransitionTime") or None
    return None, None


def _image_pull(status: Mapping[str, Any]) -> ImagePullFailure | None:
    """The first (init) container waiting for an image it cannot get, if any."""
    statuses = [
        *(status.get("initContainerStatuses") or ()),
        *(status.get("containerStatuses") or ()),
    ]
    for cs in statuses:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in IMAGE_PULL_REASONS:
            return ImagePullFailure(
                reason=str(waiting["reason"]),
                container=str(cs.get("name") or ""),
                image=str(cs.get("image") or ""),
                message=str(waiting.get("message") or ""),
            )
    return None


def _compute_image(spec: Mapping[str, Any]) -> str | None:
    for c in spec.get("containers") or ():
        if c.get("name") == COMPUTE_CONTAINER:
            return str(c.get("image") or "") or None
    return None


def _compute_state(status: Mapping[str, Any]) -> Mapping[str, Any]:
    """The compute container's state ({"running": …} / {"terminated": …}), {} if unknown."""
    for cs in status.get("containerStatuses") or ():
        if cs.get("name") == COMPUTE_CONTAINER:
            return cs.get("state") or {}
    return {}


def _failure(status: Mapping[str, Any]) -> str | None:
    """The compute container's termination (exit code, reason, message), else the pod's."""
    term = _compute_state(status).get("terminated")
    if term:
        text = f"{COMPUTE_CONTAINER} exited {term.get('exitCode')}"
        if term.get("reason"):
            text += f" ({term['reason']})"
        if term.get("message"):
            text += f": {term['message']}"
        return text
    reason, message = status.get("reason"), status.get("message")
    if reason or message:
        return ": ".join(str(p) for p in (reason, message) if p)
    return None


def vmi_uid_of(pod: LauncherPod) -> list[str]:
    """Index function: the UID of the VMI the pod belongs to."""
    return [pod.vmi_uid] if pod.vmi_uid else []


def node_of(pod: LauncherPod) -> list[str]:
    """Index function: the node the pod is bound to."""
    return [pod.node_name] if pod.node_name else []


def namespace_of(pod: LauncherPod) -> list[str]:
    """Index function: the pod's namespace."""
    return [pod.namespace]
