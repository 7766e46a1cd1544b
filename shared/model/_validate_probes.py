"""readinessProbe / livenessProbe: one handler each, a guest port the pod's IP forwards
(httpGet, tcpSocket), a command for exec, and Kubernetes' bounds on the timings."""

from __future__ import annotations

from shared.model._validate_common import Errors
from shared.model.probes import Probe
from shared.model.vmi import VMISpec

SCHEMES = ("HTTP", "HTTPS")
_MIN_ONE = ("periodSeconds", "successThreshold", "failureThreshold", "timeoutSeconds")


def has_masquerade(spec: VMISpec) -> bool:
    """The guest sits behind the pod's IP: a masquerade interface (or the default one)."""
    interfaces = spec.domain.devices.interfaces
    if not interfaces and not spec.networks:
        return True
    return any(i.masquerade is not None for i in interfaces)


def validate_probes(errs: Errors, path: str, spec: VMISpec) -> None:
    """Both probes of a VMI spec rooted at `path`."""
    for key, probe in (("readinessProbe", spec.readiness_probe),
                       ("livenessProbe", spec.liveness_probe)):  # fmt: skip
        if probe is not None:
            _validate_probe(errs, f"{path}.{key}", probe, spec)
    live = spec.liveness_probe
    if live is not None and live.success_threshold not in (None, 1):
        errs.add(f"{path}.livenessProbe.successThreshold", "must be 1", live.success_threshold)


def _validate_probe(errs: Errors, path: str, probe: Probe, spec: VMISpec) -> None:
    handlers = probe.handlers()
    if len(handlers) != 1:
        message = "exactly one of httpGet, tcpSocket, exec or guestAgentPing is required"
        errs.add(path, message, sorted(handlers) or None)
    action = probe.http_get or probe.tcp_socket
    if action is not None:
        where = f"{path}.{'httpGet' if probe.http_get is not None else 'tcpSocket'}"
        if action.port is None or not 0 < action.port < 65536:
            errs.add(f"{where}.port", "a guest port between 1 and 65535 is required", action.port)
        if action.host:
            errs.add(f"{where}.host", "not supported: probes reach the guest at the pod's IP",
                     action.host)  # fmt: skip
        if not has_masquerade(spec):
            errs.add(where, "needs a masquerade interface: the pod's IP forwards to the guest")
    if probe.http_get is not None and probe.http_get.scheme not in (None, *SCHEMES):
        errs.add(f"{path}.httpGet.scheme", "must be HTTP or HTTPS", probe.http_get.scheme)
    if probe.exec is not None and not probe.exec.command:
        errs.add(f"{path}.exec.command", "a command is required")
    wire = probe.to_dict()
    for key in ("initialDelaySeconds", *_MIN_ONE):
        value = wire.get(key)
        low = 1 if key in _MIN_ONE else 0
        if isinstance(value, int) and value < low:
            errs.add(f"{path}.{key}", f"must be {low} or more", value)
