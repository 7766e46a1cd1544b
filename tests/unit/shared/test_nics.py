"""NIC hotplug's shared rules (shared/nics.py, shared/multus.py, the model): which
interfaces can come and go, absent ones left out of the pod's multus annotation and of
status.interfaces, and `state: absent` admitted only where KubeVirt allows it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared import multus, nics
from shared.model import VirtualMachineInstance
from shared.model.validation import validate_vmi


def _vmi(*ifaces: dict[str, Any], networks: list[dict[str, Any]]) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "v", "namespace": "ns"},
        "spec": {"domain": {"devices": {"interfaces": list(ifaces)}, "memory": {"guest": "64Mi"}},
                 "networks": networks},
    })  # fmt: skip


NETS = [{"name": "default", "pod": {}}, {"name": "hot", "multus": {"networkName": "nad"}}]


def test_an_absent_nic_leaves_the_annotation_and_status_interfaces() -> None:
    """`hot` absent: not hot-pluggable-present, not in the pod's networks annotation, not
    in the spec's status.interfaces; present it is in all three."""
    plugged = _vmi({"name": "default", "masquerade": {}}, {"name": "hot", "bridge": {}},
                   networks=NETS)  # fmt: skip
    gone = _vmi({"name": "default", "masquerade": {}},
                {"name": "hot", "bridge": {}, "state": "absent"}, networks=NETS)  # fmt: skip
    hot = plugged.spec.domain.devices.interfaces[1]
    assert nics.hot_pluggable(plugged.spec, hot)
    assert [i["interface"] for i in json.loads(multus.networks_annotation(plugged) or "[]")] == [
        multus.pod_interface("hot")
    ]
    assert multus.networks_annotation(gone) is None
    assert [i.name for i in nics.present(gone)] == ["default"]
    assert [s.name for s in gone.interface_statuses(pod_ip=None)] == ["default"]


def test_absent_on_a_multus_bridge_nic_is_admitted() -> None:
    """KubeVirt's hot-unplug: a bridge-bound interface on a multus network may be absent."""
    vmi = _vmi({"name": "default", "masquerade": {}},
               {"name": "hot", "bridge": {}, "state": "absent"}, networks=NETS)  # fmt: skip
    assert [e for e in validate_vmi(vmi) if "state" in e.path] == []


@pytest.mark.parametrize(
    ("iface", "index"),
    [
        pytest.param({"name": "default", "masquerade": {}, "state": "absent"}, 0, id="pod-network"),
        pytest.param({"name": "hot", "masquerade": {}, "state": "absent"}, 1, id="not-bridge"),
    ],
)  # fmt: skip
def test_absent_elsewhere_is_refused_naming_the_field(iface: dict[str, Any], index: int) -> None:
    """absent on the pod network, or on a multus interface not bridge-bound, is refused at
    its own `state` path saying what an unplug needs."""
    others = [{"name": "default", "masquerade": {}}, {"name": "hot", "bridge": {}}]
    others[index] = iface
    errors = validate_vmi(_vmi(*others, networks=NETS))
    path = f"spec.domain.devices.interfaces[{index}].state"
    assert any(e.path == path and "bridge-bound interface on a multus" in e.message
               for e in errors), errors  # fmt: skip
