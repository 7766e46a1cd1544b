"""Network binding plugins at admission: an interface's `binding: {name}` must name a plugin
the KubeVirt CR registers (read live), one kubevirt-py can run (shared/netbinding.py), as
KubeVirt's webhook refuses an unregistered one, naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared import netbinding
from shared.clusterconfig import ClusterConfig
from shared.model import FieldError, ParseError, VirtualMachine, VirtualMachineInstance


def binding_errors(kind: str, obj: Mapping[str, Any], config: ClusterConfig) -> list[FieldError]:
    """Each interface of a VM's template or a VMI whose binding plugin cannot be used."""
    try:
        if kind == VirtualMachine.KIND:
            vmi = VirtualMachineInstance(spec=VirtualMachine.from_dict(obj).spec.template.spec)
            prefix = "spec.template.spec"
        elif kind == VirtualMachineInstance.KIND:
            vmi, prefix = VirtualMachineInstance.from_dict(obj), "spec"
        else:
            return []
    except ParseError:
        return []  # named by the model's validation
    return netbinding.interface_errors(config.binding_plugins, vmi, prefix=prefix)
