"""Pod status as a kubelet reports it: container states, conditions and the phase.

ContainerRecord is the agent's live view of one container; ``pod_status`` turns the
records into the API's ``status`` (conditions merge by type under a strategic merge
patch, so the scheduler's PodScheduled condition survives).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from localkube.nodeagent.kube import JSON
from localkube.nodeagent.node import now_rfc3339
from localkube.nodeagent.podspec import Pod, RestartPolicy
from localkube.nodeagent.refs import HOST_IP, pod_ip


@dataclass(slots=True, kw_only=True)
class ContainerRecord:
    """Mutable state of one container, owned by its pod worker."""

    name: str
    image: str
    init: bool = False
    restart_count: int = 0
    state: JSON = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: JSON = field(default_factory=dict)
    ever_ran: bool = False

    @classmethod
    def restore(
        cls, name: str, image: str, api: Mapping[str, Any], *, init: bool
    ) -> ContainerRecord:
        """Continue from what the API recorded (after a node agent restart)."""
        rec = cls(name=name, image=image, init=init, restart_count=int(api.get("restartCount", 0)))
        state = api.get("state") or {}
        if "terminated" in state:
            rec.state, rec.ever_ran = dict(state), True
        elif "running" in state:
            # The process was orphaned by the previous agent and has been killed.
            rec.ever_ran = True
            rec.state = {
                "terminated": {
                    "exitCode": 137,
                    "reason": "ContainerStatusUnknown",
                    "message": "the container could not be located when the node agent restarted",
                    "startedAt": state["running"].get("startedAt"),
                    "finishedAt": now_rfc3339(),
                }
            }
        return rec

    @property
    def running(self) -> bool:
        return "running" in self.state

    @property
    def terminated(self) -> Mapping[str, Any] | None:
        return self.state.get("terminated")

    def set_waiting(self, reason: str, message: str = "") -> None:
        if self.terminated is not None:
            self.last_state = {"terminated": dict(self.terminated)}
        self.state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}

    def set_running(self) -> None:
        if self.terminated is not None:
            self.last_state = {"terminated": dict(self.terminated)}
        if self.ever_ran:
            self.restart_count += 1
        self.ever_ran = True
        self.state = {"running": {"startedAt": now_rfc3339()}}

    def set_terminated(self, exit_code: int, message: str = "") -> None:
        started = self.state.get("running", {}).get("startedAt")
        term: JSON = {
            "exitCode": exit_code,
            "reason": "Completed" if exit_code == 0 else "Error",
            "startedAt": started,
            "finishedAt": now_rfc3339(),
        }
        if message:
            term["message"] = message
        self.state = {"terminated": term}

    def to_api(self, pod_uid: str) -> JSON:
        return {
            "name": self.name,
            "image": self.image,
            "imageID": f"localkube://{self.image}",
            "containerID": f"localkube://{pod_uid}/{self.name}/{self.restart_count}",
            "ready": self.running and not self.init,
            "started": self.running,
            "restartCount": self.restart_count,
            "state": self.state,
            "lastState": self.last_state,
        }


def phase(pod: Pod, init: Sequence[ContainerRecord], main: Sequence[ContainerRecord]) -> str:
    """The pod phase from its containers, following the kubelet's rules."""
    never = pod.restart_policy is RestartPolicy.NEVER
    if not all(r.terminated and r.terminated["exitCode"] == 0 for r in init):
        init_failed = any(r.terminated and r.terminated["exitCode"] != 0 for r in init)
        return "Failed" if init_failed and never else "Pending"
    if any(not r.ever_ran for r in main):
        return "Pending"
    done = [r.terminated for r in main]
    if any(t is None for t in done) or pod.restart_policy is RestartPolicy.ALWAYS:
        return "Running"  # running, or waiting to restart
    if all(t is not None and t["exitCode"] == 0 for t in done):
        return "Succeeded"
    return "Failed" if never else "Running"


def pod_status(
    pod: Pod,
    *,
    init: Sequence[ContainerRecord],
    main: Sequence[ContainerRecord],
    sandbox_ready: bool,
    start_time: str,
) -> JSON:
    pod_phase = phase(pod, init, main)
    initialized = all(r.terminated and r.terminated["exitCode"] == 0 for r in init)
    ready = pod_phase == "Running" and all(r.running for r in main)
    previous = {c["type"]: c for c in pod.raw.get("status", {}).get("conditions") or ()}

    def cond(kind: str, ok: bool, reason: str = "") -> JSON:
        status = "True" if ok else "False"
        old = previous.get(kind, {})
        since = old.get("lastTransitionTime") if old.get("status") == status else None
        out: JSON = {
            "type": kind,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": since or now_rfc3339(),
        }
        if reason and not ok:
            out["reason"] = reason
        return out

    return {
        "phase": pod_phase,
        "hostIP": HOST_IP,
        "hostIPs": [{"ip": HOST_IP}],
        "podIP": pod_ip(pod.uid),
        "podIPs": [{"ip": pod_ip(pod.uid)}],
        "startTime": start_time,
        "conditions": [
            cond("PodReadyToStartContainers", sandbox_ready),
            cond("Initialized", initialized, "ContainersNotInitialized"),
            cond("ContainersReady", ready, "ContainersNotReady"),
            cond("Ready", ready, "ContainersNotReady"),
        ],
        "initContainerStatuses": [r.to_api(pod.uid) for r in init],
        "containerStatuses": [r.to_api(pod.uid) for r in main],
    }
