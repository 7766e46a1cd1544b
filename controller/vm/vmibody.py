"""The VMI a VM creates: its template's metadata and spec, expanded with the VM's
instancetype and preference, named after and owned by the VM."""

from __future__ import annotations

from typing import Any

from controller.vm.hotplug import started_with
from controller.vm.nichotplug import without_absent
from controller.vm.receiver import receiver_annotations
from shared.instancetypes.apply import expand
from shared.labels import VM_LABEL
from shared.model import API_VERSION, VirtualMachine, VirtualMachineInstance
from shared.model.instancetype import InstancetypeSpec, PreferenceSpec


def vmi_from_template(
    vm: VirtualMachine,
    *,
    instancetype: InstancetypeSpec | None = None,
    preference: PreferenceSpec | None = None,
) -> dict[str, Any]:
    """The VMI body: the template's metadata and spec (expanded with the VM's instancetype
    and preference), named after and owned by the VM."""
    meta = vm.spec.template.metadata
    spec = without_absent(vm.spec.template.spec.to_dict())  # unplugged NICs stay out
    annotations = dict(meta.annotations)
    if instancetype is not None or preference is not None:
        expanded = expand(
            spec, annotations=annotations, instancetype=instancetype, preference=preference
        )
        spec, annotations = expanded.spec, {**annotations, **expanded.annotations}
    annotations.update(started_with(vm))
    annotations.update(receiver_annotations(vm))
    return {
        "apiVersion": API_VERSION,
        "kind": VirtualMachineInstance.KIND,
        "metadata": {
            "name": vm.name,
            "namespace": vm.namespace,
            "labels": {**meta.labels, VM_LABEL: vm.name},
            "annotations": annotations,
            "ownerReferences": [owner_ref(vm)],
        },
        "spec": spec,
    }


def owner_ref(vm: VirtualMachine) -> dict[str, Any]:
    """The controller reference to the VM, on what it makes (its VMI, its DataVolumes)."""
    return vm.controller_reference().to_dict()
