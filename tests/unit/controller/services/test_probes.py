"""A VMI's probes become the launcher pod's: httpGet / tcpSocket as they are (the pod's IP
forwards to the guest), guestAgentPing / exec as virt-probe-py exec probes; target pods of
migrations carry none."""

from __future__ import annotations

from typing import Any

import pytest

from controller.config import TemplateConfig
from controller.services.probes import pod_probe
from controller.services.template import TemplateService
from shared.model import VirtualMachineInstance
from shared.model.probes import Probe
from tests.unit.controller.builders import make_migration, vmi_dict


@pytest.mark.parametrize(
    ("probe", "expected"),
    [
        pytest.param(
            {"httpGet": {"port": 80, "path": "/"}, "periodSeconds": 2},
            {"httpGet": {"port": 80, "path": "/"}, "periodSeconds": 2},
            id="http",
        ),
        pytest.param(
            {"tcpSocket": {"port": 22}, "failureThreshold": 3},
            {"tcpSocket": {"port": 22}, "failureThreshold": 3},
            id="tcp",
        ),
        pytest.param(
            {"guestAgentPing": {}, "timeoutSeconds": 2},
            {
                "exec": {"command": ["virt-probe-py", "--timeout", "2", "ping"]},
                "timeoutSeconds": 4,
            },
            id="agent-ping",
        ),
        pytest.param(
            {"exec": {"command": ["cat", "/ok"]}},
            {
                "exec": {
                    "command": ["virt-probe-py", "--timeout", "1", "exec", "--", "cat", "/ok"]
                },
                "timeoutSeconds": 3,
            },
            id="exec",
        ),
    ],
)
def test_pod_probe(probe: dict[str, Any], expected: dict[str, Any]) -> None:
    """Each handler kind and its timings, as the kubelet will run it."""
    assert pod_probe(Probe.from_dict(probe)) == expected


def test_launcher_pod_carries_probes_and_a_target_pod_none() -> None:
    """The compute container of the launcher pod has both probes; a migration target's
    guest is not running yet, so its pod has none."""
    raw = vmi_dict()
    raw["spec"]["readinessProbe"] = {"httpGet": {"port": 80}}
    raw["spec"]["livenessProbe"] = {"tcpSocket": {"port": 80}}
    vmi = VirtualMachineInstance.from_dict(raw)
    templates = TemplateService(TemplateConfig())
    [compute] = templates.launcher_pod(vmi)["spec"]["containers"]
    assert compute["readinessProbe"] == {"httpGet": {"port": 80}}
    assert compute["livenessProbe"] == {"tcpSocket": {"port": 80}}
    target = templates.target_pod(vmi, make_migration(), source_node="node01")
    assert "readinessProbe" not in target["spec"]["containers"][0]
