"""A VM's DataVolumes: its dataVolumeTemplates made (owned by the VM) before its VMI, and
the VMI held back until every DataVolume its volumes name has Succeeded (KubeVirt's rule).

    templates_to_create(vm, existing) → DataVolume bodies (pure)
    gate(vm, dvs) → Gate: ready, or Provisioning / DataVolumeError with why (pure)
    gated(plan, gate, vmi) → the VM's plan with the VMI held back and the status saying so
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.transitions import vm_condition
from controller.vm.logic import VMPlan
from controller.vm.vmibody import owner_ref
from shared.model import (
    ConditionStatus,
    PrintableStatus,
    VirtualMachine,
    VirtualMachineInstance,
    VMConditionType,
)
from shared.model.datavolume import CDI_API_VERSION, DataVolume, DataVolumePhase

DATAVOLUME_ERROR = "DataVolumeError"
DATAVOLUME_PROVISIONING = "DataVolumeProvisioning"


@dataclass(frozen=True, slots=True, kw_only=True)
class Gate:
    """Whether the VM's DataVolumes let its VMI be made, and if not, why."""

    ready: bool = True
    printable: PrintableStatus | None = None
    reason: str = ""
    message: str = ""


def template_names(vm: VirtualMachine) -> list[str]:
    """The names of the VM's dataVolumeTemplates."""
    return [
        str((t.get("metadata") or {}).get("name") or "")
        for t in _templates(vm)
        if (t.get("metadata") or {}).get("name")
    ]


def _templates(vm: VirtualMachine) -> list[Mapping[str, Any]]:
    return [t.extra for t in vm.spec.data_volume_templates]


def volume_datavolumes(vm: VirtualMachine) -> list[str]:
    """The DataVolumes the VM's template volumes name (each once, in order)."""
    names = [
        v.data_volume.name
        for v in vm.spec.template.spec.volumes
        if v.data_volume is not None and v.data_volume.name
    ]
    return list(dict.fromkeys(names))


def templates_to_create(vm: VirtualMachine, existing: Mapping[str, Any]) -> list[dict[str, Any]]:
    """DataVolume bodies for the templates with no DataVolume yet, owned by the VM."""
    out = []
    for t in _templates(vm):
        meta = dict(t.get("metadata") or {})
        name = str(meta.get("name") or "")
        if not name or name in existing:
            continue
        meta.update(name=name, namespace=vm.namespace, ownerReferences=[owner_ref(vm)])
        out.append(
            {
                "apiVersion": t.get("apiVersion") or CDI_API_VERSION,
                "kind": DataVolume.KIND,
                "metadata": meta,
                "spec": dict(t.get("spec") or {}),
            }
        )
    return out


def gate(vm: VirtualMachine, dvs: Mapping[str, DataVolume | None]) -> Gate:
    """Ready when every named DataVolume has Succeeded; DataVolumeError when one failed."""
    waiting = []
    for name in volume_datavolumes(vm):
        dv = dvs.get(name)
        failure = dv.failure() if dv is not None else None
        if failure is not None:
            return Gate(
                ready=False,
                printable=PrintableStatus.DATA_VOLUME_ERROR,
                reason=DATAVOLUME_ERROR,
                message=f"DataVolume {vm.namespace}/{name} failed: {failure}",
            )
        if dv is None:
            waiting.append(f"DataVolume {vm.namespace}/{name} does not exist")
        elif dv.phase != DataVolumePhase.SUCCEEDED:
            progress = dv.status.progress or ""
            phase = dv.phase or "Pending"
            waiting.append(f"DataVolume {vm.namespace}/{name} is {phase} {progress}")
    if not waiting:
        return Gate()
    return Gate(
        ready=False,
        printable=PrintableStatus.PROVISIONING,
        reason=DATAVOLUME_PROVISIONING,
        message="; ".join(w.strip() for w in waiting),
    )


def gated(plan: VMPlan, g: Gate, vmi: VirtualMachineInstance | None, *, now: datetime) -> VMPlan:
    """The plan with VMI creation held back while the DataVolumes are not ready, and the
    VM's printableStatus and a Failure condition (DataVolumeError only) saying why."""
    if g.ready or (vmi is not None and not vmi.is_final()):
        return plan
    status = plan.status
    if plan.create_vmi or vmi is None:
        printable = g.printable if _would_run(plan) else status.printable_status
        status = dataclasses.replace(status, printable_status=printable)
    if g.printable == PrintableStatus.DATA_VOLUME_ERROR:
        cond = vm_condition(
            status.condition(VMConditionType.FAILURE),
            VMConditionType.FAILURE,
            ConditionStatus.TRUE,
            reason=g.reason,
            message=g.message,
            now=now,
        )
        kept = tuple(c for c in status.conditions if c.type != VMConditionType.FAILURE)
        status = dataclasses.replace(status, conditions=(*kept, cond))
    return dataclasses.replace(plan, create_vmi=False, status=status)


def _would_run(plan: VMPlan) -> bool:
    return plan.create_vmi or plan.status.printable_status in (
        PrintableStatus.STARTING,
        PrintableStatus.CRASH_LOOP_BACK_OFF,
    )
