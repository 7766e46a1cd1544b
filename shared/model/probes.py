"""readinessProbe / livenessProbe of a VMI (KubeVirt's v1.Probe): one handler (httpGet,
tcpSocket, exec through the guest agent, or guestAgentPing) and Kubernetes' timing.

The probes become the launcher pod's own probes (controller/services/probes.py): the kubelet
runs them and counts thresholds, the pod's Ready condition becomes the VMI's, and a failing
liveness probe kills the launcher, which fails the VMI.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.model._codec import Model


@dataclass(frozen=True, slots=True, kw_only=True)
class HTTPHeader(Model):
    """httpGet.httpHeaders[]."""

    name: str | None = None
    value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HTTPGetAction(Model):
    """httpGet: a GET on the guest's port (numeric ports only: the guest has no named ones)."""

    path: str | None = None
    port: int | None = None
    host: str | None = None
    scheme: str | None = None  # HTTP or HTTPS
    http_headers: tuple[HTTPHeader, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TCPSocketAction(Model):
    """tcpSocket: a TCP connect to the guest's port."""

    port: int | None = None
    host: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecAction(Model):
    """exec: a command run in the guest by its agent (exit 0 = success)."""

    command: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class GuestAgentPing(Model):
    """guestAgentPing: the guest agent answers guest-ping."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe(Model):
    """A probe: its handler and when and how often the kubelet runs it."""

    http_get: HTTPGetAction | None = None
    tcp_socket: TCPSocketAction | None = None
    exec: ExecAction | None = None
    guest_agent_ping: GuestAgentPing | None = None
    initial_delay_seconds: int | None = None
    timeout_seconds: int | None = None
    period_seconds: int | None = None
    success_threshold: int | None = None
    failure_threshold: int | None = None

    def handlers(self) -> Mapping[str, object]:
        """The handler fields that are set, by wire name."""
        found = {
            "httpGet": self.http_get,
            "tcpSocket": self.tcp_socket,
            "exec": self.exec,
            "guestAgentPing": self.guest_agent_ping,
        }
        return {k: v for k, v in found.items() if v is not None}

    @property
    def guest_port(self) -> int | None:
        """The guest port an httpGet or tcpSocket probe reaches."""
        action = self.http_get or self.tcp_socket
        return action.port if action is not None else None
