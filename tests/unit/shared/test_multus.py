"""Multus secondary networks: the launcher pod's `k8s.v1.cni.cncf.io/networks` annotation the
controller writes, the pod interface names (KubeVirt's `pod<hash>`), and the interfaces
virt-handler wires into the guest from them."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from controller.config import TemplateConfig
from controller.services.template import TemplateService
from handler.netwire import Target
from handler.podnet import pod_target, secondary_targets
from shared import multus
from shared.model import VirtualMachineInstance
from shared.model.validation import validate_vmi
from shared.podnet import Binding
from tests.unit.controller.builders import make_vmi, vmi_dict
from tests.unit.controller.services.test_template import IMAGE


def _spec(raw: dict[str, Any]) -> dict[str, Any]:
    raw["spec"]["domain"]["devices"]["interfaces"] = [
        {"name": "default", "masquerade": {}},
        {"name": "sec", "bridge": {}, "macAddress": "02:00:00:00:00:09"},
        {"name": "other", "bridge": {}},
    ]
    raw["spec"]["networks"] = [
        {"name": "default", "pod": {}},
        {"name": "sec", "multus": {"networkName": "sec-net"}},
        {"name": "other", "multus": {"networkName": "infra/shared-net"}},
    ]
    return raw


def test_pod_interface_names_are_kubevirts_hashed_ones() -> None:
    """`pod` + the first 11 hex digits of the SHA-256 of the VMI network's name."""
    want = "pod" + hashlib.sha256(b"sec").hexdigest()[:11]
    assert multus.pod_interface("sec") == want
    assert len(want) <= 15


def test_launcher_pod_asks_multus_for_each_secondary_network() -> None:
    """Each multus network is one annotation entry: the NAD (bare names in the VMI's
    namespace) and the pod interface; a VMI without multus networks has no annotation."""
    service = TemplateService(TemplateConfig(launcher_image=IMAGE))
    vmi = make_vmi(raw=_spec(vmi_dict()))
    pod = service.launcher_pod(vmi)
    entries = json.loads(pod["metadata"]["annotations"][multus.NETWORKS_ANNOTATION])
    assert entries == [
        {"name": "sec-net", "namespace": vmi.namespace, "interface": multus.pod_interface("sec")},
        {"name": "shared-net", "namespace": "infra", "interface": multus.pod_interface("other")},
    ]
    plain = service.launcher_pod(make_vmi(raw=vmi_dict()))
    assert multus.NETWORKS_ANNOTATION not in plain["metadata"]["annotations"]


def test_secondary_interfaces_are_wired_as_bridges_on_their_pod_interfaces() -> None:
    """virt-handler wires the pod network's interface and, on tap<index>, each bridge-bound
    multus interface on the pod interface multus made for it (the spec's MAC kept)."""
    vmi = VirtualMachineInstance.from_dict(_spec(vmi_dict()))
    assert validate_vmi(vmi) == []
    assert pod_target(vmi) == Target(index=0, name="default", binding=Binding.MASQUERADE)
    assert secondary_targets(vmi) == (
        Target(
            index=1, name="sec", binding=Binding.BRIDGE, mac="02:00:00:00:00:09",
            pod_interface=multus.pod_interface("sec"),
        ),
        Target(index=2, name="other", binding=Binding.BRIDGE,
               pod_interface=multus.pod_interface("other")),
    )  # fmt: skip


def _default_spec(raw: dict[str, Any]) -> dict[str, Any]:
    raw = _spec(raw)
    raw["spec"]["networks"][0] = {
        "name": "default",
        "multus": {"networkName": "infra/primary-net", "default": True},
    }
    return raw


def test_a_multus_default_network_is_the_pods_eth0() -> None:
    """`multus.default`: the launcher pod names the NAD in `v1.multus-cni.io/default-network`
    (not among the secondary networks); it validates with masquerade and is wired, reported
    and judged migratable as the pod network is (eth0)."""
    service = TemplateService(TemplateConfig(launcher_image=IMAGE))
    vmi = make_vmi(raw=_default_spec(vmi_dict()))
    annotations = service.launcher_pod(vmi)["metadata"]["annotations"]
    assert annotations[multus.DEFAULT_NETWORK_ANNOTATION] == "infra/primary-net"
    names = [e["name"] for e in json.loads(annotations[multus.NETWORKS_ANNOTATION])]
    assert names == ["sec-net", "shared-net"]
    plain = service.launcher_pod(make_vmi(raw=vmi_dict()))
    assert multus.DEFAULT_NETWORK_ANNOTATION not in plain["metadata"]["annotations"]
    model = VirtualMachineInstance.from_dict(_default_spec(vmi_dict()))
    assert validate_vmi(model) == []
    assert pod_target(model) == Target(index=0, name="default", binding=Binding.MASQUERADE)
    assert [t.name for t in secondary_targets(model)] == ["sec", "other"]
    (default, *_) = model.interface_statuses(pod_ip="10.1.2.3")
    assert default.ip_address == "10.1.2.3"
