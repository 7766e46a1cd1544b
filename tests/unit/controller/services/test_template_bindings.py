"""The launcher pod of a VMI whose interfaces use network binding plugins: each plugin's NAD
in the multus annotation (after the VMI's own networks) and its computeResourceOverhead on
the compute container (controller/services/bindings.py)."""

from __future__ import annotations

import json
from typing import Any

from controller.config import TemplateConfig
from controller.services.template import TemplateService
from shared.model.binding import DomainAttachmentType
from shared.multus import NETWORKS_ANNOTATION
from shared.netbinding import BindingPlugin, Overhead
from tests.unit.controller.builders import make_vmi, vmi_dict
from tests.unit.controller.services.test_template import IMAGE, compute

MIB = 2**20
PLUGINS = (
    BindingPlugin(
        name="passt", nad="default/netbindingpasst",
        overhead=Overhead(request_memory=250 * MIB, request_cpu_millis=50),
    ),
    BindingPlugin(
        name="l2", attachment=DomainAttachmentType.MANAGED_TAP,
        overhead=Overhead(request_memory=MIB, limit_memory=2 * MIB),
    ),
)  # fmt: skip


def _pod(binding: str | None, *, plugins: tuple[BindingPlugin, ...] = PLUGINS) -> dict[str, Any]:
    raw = vmi_dict()
    raw["spec"]["domain"]["resources"] = {"limits": {"memory": "128Mi"}}
    iface: dict[str, Any] = {"name": "default"}
    iface.update({"binding": {"name": binding}} if binding else {"masquerade": {}})
    raw["spec"]["domain"]["devices"]["interfaces"] = [iface]
    raw["spec"]["networks"] = [{"name": "default", "pod": {}}]
    config = TemplateConfig(launcher_image=IMAGE, binding_plugins=plugins)
    return TemplateService(config).launcher_pod(make_vmi(raw=raw))


def _memory(pod: dict[str, Any], kind: str) -> int:
    return int(compute(pod)["resources"][kind]["memory"])


def test_a_plugins_overhead_lands_on_the_compute_container() -> None:
    """The passt plugin's 250Mi and 50m go into the requests (not the limits it does not
    set); l2's request and limit into both; an unused plugin adds nothing."""
    plain, passt, l2 = _pod(None), _pod("passt"), _pod("l2")
    assert _memory(passt, "requests") - _memory(plain, "requests") == 250 * MIB
    assert _memory(passt, "limits") == _memory(plain, "limits")
    cpu = compute(passt)["resources"]["requests"]["cpu"]
    assert cpu == f"{int(compute(plain)['resources']['requests']['cpu'].rstrip('m')) + 50}m"
    assert _memory(l2, "requests") - _memory(plain, "requests") == MIB
    assert _memory(l2, "limits") - _memory(plain, "limits") == 2 * MIB


def test_a_plugins_nad_joins_the_multus_annotation() -> None:
    """The passt plugin's NAD is asked of multus for the pod, with the interface's logical
    network name; a plugin without NAD or no plugin leaves no annotation."""
    entries = json.loads(_pod("passt")["metadata"]["annotations"][NETWORKS_ANNOTATION])
    assert entries == [{"name": "netbindingpasst", "namespace": "default",
                        "cni-args": {"logicNetworkName": "default"}}]  # fmt: skip
    for pod in (_pod("l2"), _pod(None)):
        assert NETWORKS_ANNOTATION not in pod["metadata"]["annotations"]
