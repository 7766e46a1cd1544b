"""Admission's rules for dedicated CPUs, realtime, guest NUMA and hugepages: each bad
value refused naming its field (shared/model/_validate_noderes.py)."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import VirtualMachineInstance
from shared.model.validation import validate_vmi


def _paths(domain: dict[str, Any]) -> list[str]:
    domain.setdefault("memory", {}).setdefault("guest", "128Mi")
    raw = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "v", "namespace": "ns"},
        "spec": {"domain": domain},
    }
    return [e.path for e in validate_vmi(VirtualMachineInstance.from_dict(raw))]


D = "spec.domain"


@pytest.mark.parametrize(
    ("domain", "path"),
    [
        pytest.param(
            {"cpu": {"dedicatedCpuPlacement": True}, "resources": {"requests": {"cpu": "1500m"}}},
            f"{D}.resources.requests.cpu",
            id="fractional-request",
        ),
        pytest.param(
            {"cpu": {"dedicatedCpuPlacement": True}, "resources": {"limits": {"cpu": "0.5"}}},
            f"{D}.resources.limits.cpu",
            id="fractional-limit",
        ),
        pytest.param(
            {
                "cpu": {"dedicatedCpuPlacement": True},
                "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}},
            },
            f"{D}.resources.limits.cpu",
            id="request-not-limit",
        ),
        pytest.param(
            {"cpu": {"dedicatedCpuPlacement": True, "sockets": 1, "maxSockets": 4}},
            f"{D}.cpu.maxSockets",
            id="dedicated-cpu-hotplug",
        ),
        pytest.param(
            {"memory": {"guest": "1Gi", "maxGuest": "2Gi", "hugepages": {"pageSize": "2Mi"}}},
            f"{D}.memory.maxGuest",
            id="hugepages-memory-hotplug",
        ),
        pytest.param(
            {"cpu": {"isolateEmulatorThread": True}},
            f"{D}.cpu.isolateEmulatorThread",
            id="isolate-without-dedicated",
        ),
        pytest.param({"cpu": {"realtime": {}}}, f"{D}.cpu.realtime", id="realtime-shared"),
        pytest.param(
            {"cpu": {"dedicatedCpuPlacement": True, "realtime": {"mask": "0-a"}}},
            f"{D}.cpu.realtime.mask",
            id="realtime-mask",
        ),
        pytest.param(
            {"cpu": {"dedicatedCpuPlacement": True, "numa": {"guestMappingPassthrough": {}}}},
            f"{D}.cpu.numa.guestMappingPassthrough",
            id="numa-without-hugepages",
        ),
        pytest.param(
            {"memory": {"guest": "128Mi", "hugepages": {"pageSize": "1Gi"}}},
            f"{D}.memory.hugepages.pageSize",
            id="hugepages-larger-than-memory",
        ),
        pytest.param(
            {"memory": {"guest": "129Mi", "hugepages": {"pageSize": "2Mi"}}},
            f"{D}.memory.hugepages.pageSize",
            id="hugepages-not-a-multiple",
        ),
        pytest.param(
            {"memory": {"guest": "128Mi", "hugepages": {"pageSize": "big"}}},
            f"{D}.memory.hugepages.pageSize",
            id="hugepages-not-a-size",
        ),
    ],
)
def test_bad_node_resource_fields_are_named(domain: dict[str, Any], path: str) -> None:
    """Each bad value is refused at its field."""
    assert path in _paths(domain)


def test_vmi_fedora_isolated_settings_are_admitted() -> None:
    """KubeVirt's vmi-fedora-isolated CPU settings, with hugepages and NUMA passthrough."""
    domain = {
        "cpu": {
            "dedicatedCpuPlacement": True,
            "isolateEmulatorThread": True,
            "numa": {"guestMappingPassthrough": {}},
            "realtime": {"mask": "0"},
        },
        "memory": {"guest": "128Mi", "hugepages": {"pageSize": "2Mi"}},
        "resources": {"requests": {"cpu": "1"}},
    }
    assert _paths(domain) == []
