"""VMI validation of readinessProbe / livenessProbe: one handler, a real guest port, no
host, a command for exec, Kubernetes' bounds; and a valid probe passes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.shared._validation_support import IFACES, messages_at, vmi_errors

R = "spec.readinessProbe"
L = "spec.livenessProbe"

RULES = [
    pytest.param({R: {}}, R, "exactly one of", id="no-handler"),
    pytest.param(
        {R: {"tcpSocket": {"port": 1}, "guestAgentPing": {}}}, R, "exactly one of", id="two"
    ),
    pytest.param({R: {"tcpSocket": {}}}, f"{R}.tcpSocket.port", "guest port", id="no-port"),
    pytest.param(
        {R: {"httpGet": {"port": 70000}}}, f"{R}.httpGet.port", "guest port", id="port-range"
    ),
    pytest.param(
        {R: {"httpGet": {"port": 80, "host": "10.0.0.1"}}},
        f"{R}.httpGet.host",
        "pod's IP",
        id="host",
    ),
    pytest.param(
        {R: {"httpGet": {"port": 80, "scheme": "FTP"}}}, f"{R}.httpGet.scheme", "HTTP", id="scheme"
    ),
    pytest.param({L: {"exec": {}}}, f"{L}.exec.command", "required", id="exec-no-command"),
    pytest.param(
        {L: {"guestAgentPing": {}, "successThreshold": 2}},
        f"{L}.successThreshold",
        "must be 1",
        id="liveness-success-threshold",
    ),
    pytest.param(
        {R: {"guestAgentPing": {}, "periodSeconds": 0}},
        f"{R}.periodSeconds",
        "1 or more",
        id="period",
    ),
    pytest.param(
        {R: {"tcpSocket": {"port": 80}}, IFACES: [{"name": "default", "bridge": {}}]},
        f"{R}.tcpSocket",
        "masquerade",
        id="needs-masquerade",
    ),
]


@pytest.mark.parametrize(("changes", "path", "fragment"), RULES)
def test_rule_reports_problem_at_path(changes: dict[str, Any], path: str, fragment: str) -> None:
    """Each broken rule is reported at its field path with an explaining message."""
    found = messages_at(vmi_errors(changes), path)
    assert any(fragment in m for m in found), found


def test_valid_probes_pass() -> None:
    """An httpGet readiness probe and a guest-agent liveness probe are accepted."""
    changes = {
        R: {"httpGet": {"port": 80, "path": "/"}, "periodSeconds": 2, "failureThreshold": 2},
        L: {"guestAgentPing": {}, "initialDelaySeconds": 30},
    }
    assert vmi_errors(changes) == []
