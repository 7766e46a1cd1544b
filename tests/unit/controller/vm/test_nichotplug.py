"""A running VM's NIC hotplug, unplug and NAD swap go live (controller/vm/nichotplug.py):
what the VM controller patches onto the VMI and what still needs a restart."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.vm.liveupdate import live_ops, restart_fields
from controller.vm.nichotplug import plan_nics, without_absent
from controller.vm.vmibody import vmi_from_template
from shared.clusterconfig import RolloutStrategy
from shared.model import VirtualMachine, VirtualMachineInstance

LIVE, STAGE = RolloutStrategy.LIVE_UPDATE, RolloutStrategy.STAGE
IFACES = "/spec/domain/devices/interfaces"
POD = ({"name": "default", "masquerade": {}}, {"name": "default", "pod": {}})
SEC = ({"name": "sec", "bridge": {}}, {"name": "sec", "multus": {"networkName": "nad-a"}})
HOT = ({"name": "hot", "bridge": {}}, {"name": "hot", "multus": {"networkName": "nad-c"}})


def _spec(*pairs: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, Any]:
    pairs = copy.deepcopy(pairs)
    return {
        "domain": {"devices": {"interfaces": [i for i, _ in pairs]}},
        "networks": [n for _, n in pairs],
    }


def _vm(spec: dict[str, Any]) -> VirtualMachine:
    return VirtualMachine.from_dict({"metadata": {"name": "v", "namespace": "ns", "uid": "vm"},
                                     "spec": {"template": {"spec": spec}}})  # fmt: skip


def _vmi(spec: dict[str, Any]) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict(
        {"metadata": {"name": "v"}, "spec": spec, "status": {"phase": "Running"}}
    )


def _absent(pair: tuple[dict[str, Any], dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    return ({**pair[0], "state": "absent"}, pair[1])


def test_an_added_multus_bridge_nic_is_appended_to_the_vmi_without_restart() -> None:
    """Template gains `hot` (bridge on a multus network): the VMI's interfaces and networks
    are replaced (tested first) by theirs plus `hot`, no RestartRequired; with Stage the
    change waits for a restart."""
    vm, vmi = _vm(_spec(POD, SEC, HOT)), _vmi(_spec(POD, SEC))
    ops = live_ops(vm, vmi, LIVE)
    assert [(o["op"], o["path"]) for o in ops] == [
        ("test", IFACES), ("replace", IFACES), ("test", "/spec/networks"),
        ("replace", "/spec/networks"),
    ]  # fmt: skip
    assert ops[1]["value"][-1] == HOT[0] and ops[3]["value"][-1] == HOT[1]
    assert restart_fields(vm, vmi, LIVE) == []
    assert live_ops(vm, vmi, STAGE) == []
    assert restart_fields(vm, vmi, STAGE)


def test_state_absent_is_copied_and_the_vm_needs_no_restart() -> None:
    """Template sets `hot` absent: the VMI's `hot` gets state absent (it stays in the VMI's
    spec), no RestartRequired; the link-state path does not also patch it."""
    vm, vmi = _vm(_spec(POD, SEC, _absent(HOT))), _vmi(_spec(POD, SEC, HOT))
    ops = live_ops(vm, vmi, LIVE)
    assert [o["op"] for o in ops] == ["test", "replace"]
    assert ops[1]["value"][2] == {"name": "hot", "bridge": {}, "state": "absent"}
    assert restart_fields(vm, vmi, LIVE) == []


def test_a_nad_swap_follows_the_template() -> None:
    """Template points `sec` at another NAD (KubeVirt 1.8): only the VMI's networks are
    replaced, with the new networkName; no restart."""
    swapped = (SEC[0], {"name": "sec", "multus": {"networkName": "nad-b"}})
    vm, vmi = _vm(_spec(POD, swapped)), _vmi(_spec(POD, SEC))
    ops = live_ops(vm, vmi, LIVE)
    assert [(o["op"], o["path"]) for o in ops] == [("test", "/spec/networks"),
                                                   ("replace", "/spec/networks")]  # fmt: skip
    assert ops[1]["value"][1]["multus"]["networkName"] == "nad-b"
    assert restart_fields(vm, vmi, LIVE) == []


@pytest.mark.parametrize(
    ("template", "running"),
    [
        pytest.param(_spec(POD, SEC, ({"name": "hot", "masquerade": {}}, {"name": "hot", "pod": {}})),
                     _spec(POD, SEC), id="pod-network-nic"),
        pytest.param(_spec(POD, HOT, SEC), _spec(POD, SEC), id="inserted-before-others"),
        pytest.param(_spec(POD, SEC, HOT), _spec(POD, SEC, _absent(HOT)), id="plugged-again"),
        pytest.param(_spec(POD, ({"name": "sec", "bridge": {}, "model": "e1000"}, SEC[1]), HOT),
                     _spec(POD, SEC), id="hotplug-beside-another-change"),
    ],
)  # fmt: skip
def test_other_nic_changes_need_a_restart(
    template: dict[str, Any], running: dict[str, Any]
) -> None:
    """A NIC on the pod network, one inserted before existing ones, one unplugged and
    asked back, or a hotplug beside another interface change: nothing is patched and
    RestartRequired names the interfaces or networks."""
    vm, vmi = _vm(template), _vmi(running)
    assert [o for o in live_ops(vm, vmi, LIVE) if "interfaces" in o["path"]] == []
    assert any("interfaces" in f or "networks" in f for f in restart_fields(vm, vmi, LIVE))


def test_a_new_vmi_leaves_absent_nics_out_and_the_template_is_no_restart_then() -> None:
    """A VMI made from a template with `hot` absent has neither its interface nor its
    network; comparing that template with it finds nothing to restart for."""
    spec = _spec(POD, SEC, _absent(HOT))
    body = vmi_from_template(_vm(spec))
    assert [i["name"] for i in body["spec"]["domain"]["devices"]["interfaces"]] == [
        "default",
        "sec",
    ]
    assert [n["name"] for n in body["spec"]["networks"]] == ["default", "sec"]
    vmi = _vmi(body["spec"])
    assert restart_fields(_vm(spec), vmi, LIVE) == []
    assert live_ops(_vm(spec), vmi, LIVE) == []


def test_without_absent_keeps_the_named_ones() -> None:
    """without_absent drops absent interfaces and their networks, except those kept."""
    spec = _spec(POD, _absent(HOT))
    assert without_absent(spec)["networks"] == [POD[1]]
    assert without_absent(spec, keep=["hot"]) == spec
    assert plan_nics(spec, spec).ops == []
