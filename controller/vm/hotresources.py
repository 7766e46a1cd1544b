"""CPU sockets and guest memory of a running VM, changed live (pure): KubeVirt's hotplug.

With `vmRolloutStrategy: LiveUpdate` a VMI made from a VM gets room to grow: `maxSockets`
(the template's, else the KubeVirt CR's `liveUpdateConfiguration.maxCpuSockets`, else
`maxHotplugRatio` x sockets) and, for a guest of at least 1Gi, `maxGuest` (the template's,
else `maxHotplugRatio` x guest) — KubeVirt's defaults. A later change of the template's
`cpu.sockets` within maxSockets (cores and threads unchanged), or a raise of `memory.guest`
within maxGuest, is copied onto the running VMI's spec; virt-handler has the launcher
hot-plug it (handler/hotresources.py). Anything else — more than the ceiling, less memory
(KubeVirt never unplugs memory) — needs a restart (RestartRequired names the field).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from shared.clusterconfig import ClusterConfig
from shared.model import VirtualMachine, VirtualMachineInstance
from shared.model.errors import QuantityError
from shared.model.quantity import format_bytes, parse_bytes

SOCKETS_PATH = "spec.domain.cpu.sockets"
GUEST_PATH = "spec.domain.memory.guest"
MIN_HOTPLUG_MEMORY = 1024**3  # KubeVirt: memory hotplug needs a guest of at least 1Gi
BLOCK = 2 * 1024**2  # virtio-mem's block (launcher/plan.py): maxGuest is whole blocks


@dataclass(frozen=True, slots=True, kw_only=True)
class HotplugLimits:
    """The KubeVirt CR's liveUpdateConfiguration."""

    max_cpu_sockets: int | None = None
    max_hotplug_ratio: int = 4

    @classmethod
    def of(cls, config: ClusterConfig) -> HotplugLimits:
        ratio = config.max_hotplug_ratio
        return cls(max_cpu_sockets=config.max_cpu_sockets, max_hotplug_ratio=ratio)


def with_ceilings(body: dict[str, Any], limits: HotplugLimits) -> dict[str, Any]:
    """The VMI body with maxSockets and maxGuest defaulted (a copy; LiveUpdate only); not
    for dedicated CPUs (pinned 1:1, no room) nor for hugepage-backed memory."""
    out = copy.deepcopy(body)
    domain = out.setdefault("spec", {}).setdefault("domain", {})
    cpu = domain.setdefault("cpu", {})
    if not cpu.get("maxSockets") and not cpu.get("dedicatedCpuPlacement"):
        sockets = int(cpu.get("sockets") or 1)
        ceiling = limits.max_cpu_sockets or sockets * limits.max_hotplug_ratio
        cpu["maxSockets"] = max(sockets, ceiling)
    memory = domain.get("memory") or {}
    guest = _bytes(memory.get("guest"))
    grows = "maxGuest" not in memory and not memory.get("hugepages")
    if grows and guest is not None and guest >= MIN_HOTPLUG_MEMORY:
        most = guest * limits.max_hotplug_ratio // BLOCK * BLOCK
        domain["memory"] = {**memory, "maxGuest": format_bytes(most)}
    return out


def _bytes(quantity: object) -> int | None:
    if not isinstance(quantity, str | int) or isinstance(quantity, bool):
        return None
    try:
        return parse_bytes(quantity)
    except QuantityError:
        return None


def live_sockets(vm: VirtualMachine, vmi: VirtualMachineInstance) -> int | None:
    """The template's sockets when they differ from the VMI's and can change live. A VM
    with an instancetype has its CPU from there, not from the template: never live here."""
    if vm.spec.instancetype is not None:
        return None
    want, have = vm.spec.template.spec.domain.cpu, vmi.spec.domain.cpu
    sockets = want.sockets or 1
    if sockets == (have.sockets or 1) or have.max_sockets is None or sockets > have.max_sockets:
        return None
    if (want.cores or 1, want.threads or 1) != (have.cores or 1, have.threads or 1):
        return None
    return sockets


def live_guest(vm: VirtualMachine, vmi: VirtualMachineInstance) -> str | int | None:
    """The template's memory.guest when it raises the VMI's within its maxGuest (never for
    a VM with an instancetype: its memory comes from there)."""
    if vm.spec.instancetype is not None:
        return None
    want, have = vm.spec.template.spec.domain.memory, vmi.spec.domain.memory
    new, old, most = _bytes(want.guest), _bytes(have.guest), _bytes(have.max_guest)
    if new is None or old is None or most is None or not old < new <= most:
        return None
    return want.guest


def live_paths(vm: VirtualMachine, vmi: VirtualMachineInstance) -> tuple[str, ...]:
    """The template paths whose change reaches the running VMI live."""
    out = []
    if live_sockets(vm, vmi) is not None:
        out.append(SOCKETS_PATH)
    if live_guest(vm, vmi) is not None:
        out.append(GUEST_PATH)
    return tuple(out)


def hotplug_ops(vm: VirtualMachine, vmi: VirtualMachineInstance) -> list[dict[str, Any]]:
    """JSON-patch operations copying live sockets and guest memory onto the VMI."""
    ops: list[dict[str, Any]] = []
    sockets, guest = live_sockets(vm, vmi), live_guest(vm, vmi)
    if sockets is not None:
        ops.append({"op": "add", "path": "/spec/domain/cpu/sockets", "value": sockets})
    if guest is not None:
        ops.append({"op": "add", "path": "/spec/domain/memory/guest", "value": guest})
    return ops
