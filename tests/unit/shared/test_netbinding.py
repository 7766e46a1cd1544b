"""KubeVirt's network binding plugins: the KubeVirt CR's registrations validated naming each
bad field, the plugin an interface refers to, admission's refusals, and the plugin NADs in
the launcher pod's multus annotation (shared/netbinding.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.clusterconfig import ClusterConfig, resolve, validate_kubevirt
from shared.model import VirtualMachineInstance
from shared.model.binding import DomainAttachmentType
from shared.model.kubevirt import KubeVirt
from shared.netbinding import (
    BindingPlugin,
    Overhead,
    attached,
    interface_errors,
    own_networks,
    pod_networks,
)

FIELD = "spec.configuration.network.binding"


def _kv(binding: dict[str, Any]) -> KubeVirt:
    return KubeVirt.from_dict({
        "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt", "metadata": {"name": "kubevirt"},
        "spec": {"configuration": {"network": {"binding": binding}}},
    })  # fmt: skip


def _vmi(*interfaces: dict[str, Any], multus: bool = False) -> VirtualMachineInstance:
    networks = [
        {"name": i["name"], **({"multus": {"networkName": "nad1"}} if multus else {"pod": {}})}
        for i in interfaces
    ]
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "v", "namespace": "ns1", "uid": "u"},
        "spec": {"domain": {"devices": {"interfaces": list(interfaces)}}, "networks": networks},
    })  # fmt: skip


@pytest.mark.parametrize(
    ("plugin", "path", "message"),
    [
        pytest.param({"domainAttachmentType": "bridge"}, "x.domainAttachmentType",
                     "must be one of tap, managedTap", id="attachment"),
        pytest.param({"migration": {"method": "reboot"}}, "x.migration.method",
                     "must be one of link-refresh", id="migration-method"),
        pytest.param({"downwardAPI": "everything"}, "x.downwardAPI",
                     "must be one of device-info", id="downward-api"),
        pytest.param({"networkAttachmentDefinition": "a/b/c"}, "x.networkAttachmentDefinition",
                     "<name> or <namespace>/<name>", id="nad-three-parts"),
        pytest.param({"networkAttachmentDefinition": "Bad_Name"},
                     "x.networkAttachmentDefinition", "NetworkAttachmentDefinition",
                     id="nad-not-a-name"),
        pytest.param({"computeResourceOverhead": {"requests": {"memory": "lots"}}},
                     "x.computeResourceOverhead.requests.memory", "quantity",
                     id="overhead-quantity"),
        pytest.param({"computeResourceOverhead": {"limits": {"cpu": "-1"}}},
                     "x.computeResourceOverhead.limits.cpu", "must not be negative",
                     id="overhead-negative"),
        pytest.param({"computeResourceOverhead": {"requests": {"nvidia.com/gpu": "1"}}},
                     "x.computeResourceOverhead.requests.nvidia.com/gpu", "only memory and cpu",
                     id="overhead-resource"),
    ],
)  # fmt: skip
def test_a_bad_registration_is_refused_naming_the_field(
    plugin: dict[str, Any], path: str, message: str
) -> None:
    """Each bad value of a registered plugin is one error at its path under the CR's
    network.binding; the configuration in force stays as it was."""
    errors = validate_kubevirt(_kv({"x": plugin}))
    assert [e.path for e in errors] == [f"{FIELD}.{path}"], errors
    assert message in errors[0].message


def test_a_registration_resolves_for_the_daemons() -> None:
    """KubeVirt's guide's passt registration and a managedTap one resolve: NAD, attachment,
    migration, link-refresh and overhead in bytes and millicores."""
    config = resolve(ClusterConfig(), _kv({
        "passt": {"sidecarImage": "quay.io/kubevirt/network-passt-binding:v1.8.2",
                  "networkAttachmentDefinition": "default/netbindingpasst", "migration": {},
                  "computeResourceOverhead": {"requests": {"memory": "250Mi"}}},
        "l2": {"domainAttachmentType": "managedTap", "downwardAPI": "device-info",
               "migration": {"method": "link-refresh"},
               "computeResourceOverhead": {"requests": {"cpu": "100m"}, "limits": {"memory": "1Mi"}}},
    }))  # fmt: skip
    l2, passt = config.binding_plugins
    assert passt.native and passt.migratable and not passt.link_refresh
    assert passt.nad == "default/netbindingpasst"
    assert passt.overhead == Overhead(request_memory=250 * 2**20)
    assert l2.attachment is DomainAttachmentType.MANAGED_TAP and l2.link_refresh
    assert l2.overhead == Overhead(request_cpu_millis=100, limit_memory=2**20)


def test_admission_refuses_what_no_daemon_can_run() -> None:
    """An unregistered plugin, a hook sidecar (not for passt, implemented natively) and a
    plugin with nothing to attach the domain by are refused at binding.name, saying why."""
    plugins = (
        BindingPlugin(name="passt", sidecar_image="img"),
        BindingPlugin(name="hooked", sidecar_image="img",
                      attachment=DomainAttachmentType.TAP),
        BindingPlugin(name="nad-only", nad="n"),
        BindingPlugin(name="tapped", attachment=DomainAttachmentType.TAP),
    )  # fmt: skip
    vmi = _vmi(*({"name": f"n{i}", "binding": {"name": name}} for i, name in enumerate(
        ("passt", "hooked", "nad-only", "tapped", "missing"))))  # fmt: skip
    errors = interface_errors(plugins, vmi, prefix="spec")
    by_path = {e.path: e.message for e in errors}
    base = "spec.domain.devices.interfaces"
    assert set(by_path) == {f"{base}[{i}].binding.name" for i in (1, 2, 4)}, errors
    assert "runs no hook sidecars" in by_path[f"{base}[1].binding.name"]
    assert f"{FIELD}.hooked.sidecarImage" in by_path[f"{base}[1].binding.name"]
    assert "no domainAttachmentType" in by_path[f"{base}[2].binding.name"]
    assert "'missing' is not registered in the KubeVirt CR" in by_path[f"{base}[4].binding.name"]


def test_plugin_nads_follow_the_vmis_networks_in_the_annotation() -> None:
    """A plugin's NAD joins the multus annotation after the VMI's own networks, with
    KubeVirt's logicNetworkName (a bare name in the VMI's namespace); the workload updater's
    view strips them again; a plugin without NAD adds nothing."""
    plugins = (
        BindingPlugin(name="p", nad="binder", attachment=DomainAttachmentType.MANAGED_TAP),
        BindingPlugin(name="q", attachment=DomainAttachmentType.TAP),
    )
    vmi = _vmi({"name": "sec", "binding": {"name": "p"}}, multus=True)
    value = pod_networks(plugins, vmi)
    assert value is not None
    own, plugin = json.loads(value)
    assert own["name"] == "nad1" and own["interface"].startswith("pod")
    assert plugin == {"name": "binder", "namespace": "ns1", "cni-args": {"logicNetworkName": "sec"}}
    assert own_networks(value) == json.dumps([own], separators=(",", ":"))
    assert pod_networks(plugins, _vmi({"name": "d", "binding": {"name": "q"}})) is None
    assert [(i, p.name) for i, _, p in attached(plugins, vmi)] == [(0, "p")]
