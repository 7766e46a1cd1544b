"""A running VM's template edits (pure): what reaches its VMI live and what needs a restart.

KubeVirt's rule, with `vmRolloutStrategy: LiveUpdate` (its default): node affinity,
tolerations and the node selector go to the running VMI (they steer its next migration);
hotplugged volumes follow the template (controller/vm/hotplug.py), other volume changes
need a restart (controller/vm/volumechange.py); every other change of the template sets
the VM's RestartRequired condition, naming the fields. With `Stage` every
change waits for the restart. CPU sockets and guest memory within the VMI's maxSockets /
maxGuest are hot-plugged (controller/vm/hotresources.py; docs/live-change.md), an
interface's link `state` is set on the running domain (controller/vm/linkstate.py), and
multus NICs are hot-plugged, unplugged or moved to another NAD
(controller/vm/nichotplug.py).

The template is compared with the VMI as a subset: a value the template sets must be the
VMI's; keys only the VMI has (admission's defaults, an instancetype's expansion) are not
changes. A field removed from the template is not noticed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from controller.transitions import vm_condition
from controller.vm import linkstate
from controller.vm.hotresources import hotplug_ops, live_paths
from controller.vm.nichotplug import plan_nics
from controller.vm.volumechange import restart_volumes
from shared.clusterconfig import RolloutStrategy
from shared.model import (
    ConditionStatus,
    VirtualMachine,
    VirtualMachineInstance,
    VMConditionType,
    VMStatus,
)

# Followed by controller/vm/hotplug.py, whatever the strategy.
HOTPLUG_PATHS = ("spec.volumes", "spec.domain.devices.disks")
# Copied to the running VMI with LiveUpdate (top-level spec keys).
LIVE_KEYS = ("affinity", "tolerations", "nodeSelector")
RESTART_REQUIRED_REASON = "NonLiveUpdatableFieldChanged"


def changed_paths(template: Any, running: Any, path: str) -> list[str]:
    """Paths where `template` sets a value `running` does not have."""
    if isinstance(template, Mapping):
        if not isinstance(running, Mapping):
            return [path]
        out: list[str] = []
        for key, value in template.items():
            out += changed_paths(value, running.get(key), f"{path}.{key}")
        return out
    if isinstance(template, list):
        if not isinstance(running, list) or len(running) != len(template):
            return [path]
        return [
            p for i, v in enumerate(template) for p in changed_paths(v, running[i], f"{path}[{i}]")
        ]
    return [] if template == running else [path]


def _under(path: str, prefixes: Sequence[str]) -> bool:
    return any(path == p or path.startswith((p + ".", p + "[")) for p in prefixes)


def restart_fields(
    vm: VirtualMachine, vmi: VirtualMachineInstance, strategy: RolloutStrategy
) -> list[str]:
    """The template fields whose change only a restart brings to the running VMI."""
    template, running = vm.spec.template.spec.to_dict(), vmi.spec.to_dict()
    nic = plan_nics(template, running)
    live_nics = strategy is RolloutStrategy.LIVE_UPDATE and bool(nic.ops)
    changed = changed_paths(nic.template, nic.running if live_nics else running, "spec")
    live: list[str] = []
    if strategy is RolloutStrategy.LIVE_UPDATE:
        live = [f"spec.{k}" for k in LIVE_KEYS] + list(live_paths(vm, vmi))
        live += linkstate.live_paths(vm, vmi)
    changed = [p for p in changed if not _under(p, (*HOTPLUG_PATHS, *live))]
    return changed + restart_volumes(vm, vmi)


def live_ops(
    vm: VirtualMachine, vmi: VirtualMachineInstance, strategy: RolloutStrategy
) -> list[dict[str, Any]]:
    """JSON-patch operations copying the live-updatable fields onto the running VMI."""
    if strategy is not RolloutStrategy.LIVE_UPDATE or vmi.is_final():
        return []
    template, running = vm.spec.template.spec.to_dict(), vmi.spec.to_dict()
    ops: list[dict[str, Any]] = []
    for key in LIVE_KEYS:
        want, have = template.get(key), running.get(key)
        if want == have:
            continue
        if want is None:
            ops.append({"op": "remove", "path": f"/spec/{key}"})
        else:
            ops.append({"op": "add", "path": f"/spec/{key}", "value": want})
    ops += plan_nics(template, running).ops  # controller/vm/nichotplug.py
    return ops + hotplug_ops(vm, vmi) + linkstate.link_ops(vm, vmi)


def with_restart_required(
    status: VMStatus,
    vm: VirtualMachine,
    vmi: VirtualMachineInstance | None,
    *,
    strategy: RolloutStrategy,
    now: datetime,
) -> VMStatus:
    """`status` with RestartRequired (True naming the fields) while the running VMI lags
    its template; without the condition otherwise."""
    kind = VMConditionType.RESTART_REQUIRED
    fields = restart_fields(vm, vmi, strategy) if vmi is not None and not vmi.is_final() else []
    kept = tuple(c for c in status.conditions if c.type != kind)
    if not fields:
        return dataclasses.replace(status, conditions=kept)
    message = "a non-live-updatable field was changed in the template spec: " + ", ".join(fields)
    condition = vm_condition(
        vm.status.condition(kind), kind, ConditionStatus.TRUE,
        reason=RESTART_REQUIRED_REASON, message=message, now=now,
    )  # fmt: skip
    return dataclasses.replace(status, conditions=(*kept, condition))
