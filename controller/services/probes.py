"""A VMI's readinessProbe / livenessProbe as the launcher pod's probes (KubeVirt's way):

    httpGet, tcpSocket   the kubelet probes the pod's IP; the launcher forwards the probe's
                         port into the guest (masquerade), so the probe reaches the guest;
    guestAgentPing, exec the kubelet runs virt-probe-py in the compute container, which asks
                         the launcher to ping the guest agent or guest-exec the command.

The kubelet then owns timing and thresholds; the pod's Ready condition becomes the VMI's
(controller/vmi/logic.py) and a failed liveness probe kills the launcher (restartPolicy
Never), which fails the VMI so its VM or replica set replaces it.
"""

from __future__ import annotations

from typing import Any

from shared.model import VirtualMachineInstance
from shared.model.probes import Probe

PROBE_COMMAND = "virt-probe-py"
# exec probes: the kubelet's deadline leaves the probe command time to report the guest's.
EXEC_GRACE_SECONDS = 2
_TIMINGS = (
    "initialDelaySeconds",
    "periodSeconds",
    "successThreshold",
    "failureThreshold",
    "timeoutSeconds",
)


def pod_probe(probe: Probe) -> dict[str, Any]:
    """The core/v1 Probe of the compute container for one VMI probe."""
    wire = probe.to_dict()
    out: dict[str, Any] = {k: wire[k] for k in _TIMINGS if k in wire}
    timeout = probe.timeout_seconds or 1
    if probe.http_get is not None:
        action = probe.http_get.to_dict()
        action.pop("host", None)
        out["httpGet"] = action
    elif probe.tcp_socket is not None:
        out["tcpSocket"] = {"port": probe.tcp_socket.port}
    elif probe.exec is not None:
        command = [PROBE_COMMAND, "--timeout", str(timeout), "exec", "--", *probe.exec.command]
        out["exec"] = {"command": command}
        out["timeoutSeconds"] = timeout + EXEC_GRACE_SECONDS
    elif probe.guest_agent_ping is not None:
        out["exec"] = {"command": [PROBE_COMMAND, "--timeout", str(timeout), "ping"]}
        out["timeoutSeconds"] = timeout + EXEC_GRACE_SECONDS
    return out


def container_probes(vmi: VirtualMachineInstance) -> dict[str, Any]:
    """readinessProbe / livenessProbe keys for the compute container (none when unset)."""
    out: dict[str, Any] = {}
    if vmi.spec.readiness_probe is not None:
        out["readinessProbe"] = pod_probe(vmi.spec.readiness_probe)
    if vmi.spec.liveness_probe is not None:
        out["livenessProbe"] = pod_probe(vmi.spec.liveness_probe)
    return out
