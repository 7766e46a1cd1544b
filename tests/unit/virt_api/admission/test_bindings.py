"""Network binding plugins at admission: a VMI's or a VM template's interface naming a
plugin the KubeVirt CR does not register, or one needing a hook sidecar, is refused naming
binding.name; a registered plugin is admitted (virt_api/admission/bindings.py)."""

from __future__ import annotations

from typing import Any

from shared.clusterconfig import ClusterConfig
from shared.model.binding import DomainAttachmentType
from shared.netbinding import BindingPlugin
from tests.unit.virt_api.admission.test_defaults import demo_vmi
from virt_api.admission.bindings import binding_errors

CONFIG = ClusterConfig(
    binding_plugins=(
        BindingPlugin(name="passt", sidecar_image="quay.io/kubevirt/network-passt-binding"),
        BindingPlugin(name="l2", attachment=DomainAttachmentType.MANAGED_TAP),
        BindingPlugin(name="hooked", sidecar_image="example/sidecar"),
    )
)


def _vmi(name: str) -> dict[str, Any]:
    obj = demo_vmi()
    obj["spec"]["domain"]["devices"] = {"interfaces": [{"name": "d", "binding": {"name": name}}]}
    obj["spec"]["networks"] = [{"name": "d", "pod": {}}]
    return obj


def _vm(vmi: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": "tiny", "namespace": "default"},
            "spec": {"template": {"spec": vmi["spec"]}}}  # fmt: skip


def test_registered_plugins_are_admitted() -> None:
    """passt (its sidecar not needed) and a managedTap plugin pass, in a VMI and a VM."""
    for name in ("passt", "l2"):
        assert binding_errors("VirtualMachineInstance", _vmi(name), CONFIG) == []
        assert binding_errors("VirtualMachine", _vm(_vmi(name)), CONFIG) == []


def test_an_unregistered_or_hooked_plugin_is_refused_naming_the_field() -> None:
    """An unknown name (and any name with no plugin registered at all) and a plugin that
    needs its hook sidecar are refused at the VMI's or the VM template's binding.name."""
    (unknown,) = binding_errors("VirtualMachineInstance", _vmi("nosuch"), CONFIG)
    assert unknown.path == "spec.domain.devices.interfaces[0].binding.name"
    assert "not registered in the KubeVirt CR" in unknown.message
    (none,) = binding_errors("VirtualMachineInstance", _vmi("passt"), ClusterConfig())
    assert "'passt' is not registered" in none.message
    (hooked,) = binding_errors("VirtualMachine", _vm(_vmi("hooked")), CONFIG)
    assert hooked.path == "spec.template.spec.domain.devices.interfaces[0].binding.name"
    assert "runs no hook sidecars" in hooked.message
    assert binding_errors("VirtualMachineInstanceMigration", _vmi("nosuch"), CONFIG) == []
