"""The VM controller's part of CPU and memory hotplug: the ceilings a new VMI gets with
LiveUpdate, the live patch of sockets and guest memory, and what still needs a restart."""

from __future__ import annotations

from typing import Any

from controller.vm.hotresources import HotplugLimits, hotplug_ops, with_ceilings
from controller.vm.liveupdate import live_ops, restart_fields
from shared.clusterconfig import RolloutStrategy
from shared.model import VirtualMachine, VirtualMachineInstance

LIVE, STAGE = RolloutStrategy.LIVE_UPDATE, RolloutStrategy.STAGE


def domain(sockets: int = 1, guest: str = "1Gi", **cpu: Any) -> dict[str, Any]:
    return {"cpu": {"sockets": sockets, **cpu}, "memory": {"guest": guest}, "devices": {}}


def vm(d: dict[str, Any]) -> VirtualMachine:
    return VirtualMachine.from_dict(
        {"metadata": {"name": "a", "uid": "vm"}, "spec": {"template": {"spec": {"domain": d}}}}
    )


def running(d: dict[str, Any]) -> VirtualMachineInstance:
    return VirtualMachineInstance.from_dict(
        {"metadata": {"name": "a"}, "spec": {"domain": d}, "status": {"phase": "Running"}}
    )


def test_new_vmis_get_kubevirts_default_ceilings() -> None:
    """maxSockets = 4 x sockets (or the CR's maxCpuSockets), maxGuest = 4 x guest from 1Gi
    up; a smaller guest gets no memory hotplug; the template's own values are kept."""
    body = with_ceilings({"spec": {"domain": domain(2)}}, HotplugLimits())
    assert body["spec"]["domain"]["cpu"]["maxSockets"] == 8
    assert body["spec"]["domain"]["memory"]["maxGuest"] == "4Gi"
    capped = with_ceilings({"spec": {"domain": domain(2)}}, HotplugLimits(max_cpu_sockets=3))
    assert capped["spec"]["domain"]["cpu"]["maxSockets"] == 3
    small = with_ceilings({"spec": {"domain": domain(guest="128Mi")}}, HotplugLimits())
    assert "maxGuest" not in small["spec"]["domain"]["memory"]
    own = domain(maxSockets=2) | {"memory": {"guest": "1Gi", "maxGuest": "2Gi"}}
    kept = with_ceilings({"spec": {"domain": own}}, HotplugLimits())["spec"]["domain"]
    assert (kept["cpu"]["maxSockets"], kept["memory"]["maxGuest"]) == (2, "2Gi")


def test_dedicated_cpus_and_hugepages_get_no_ceilings() -> None:
    """Dedicated CPUs get no maxSockets (vCPUs are pinned 1:1 to the pod's CPUs) and
    hugepage-backed memory no maxGuest (KubeVirt's cx1 instancetypes start under LiveUpdate)."""
    pinned = domain(dedicatedCpuPlacement=True)
    pinned["memory"]["hugepages"] = {"pageSize": "2Mi"}
    body = with_ceilings({"spec": {"domain": pinned}}, HotplugLimits())["spec"]["domain"]
    assert "maxSockets" not in body["cpu"] and "maxGuest" not in body["memory"]


def test_sockets_and_memory_go_live_within_the_ceilings() -> None:
    """sockets 1 → 2 and guest 1Gi → 2Gi within maxSockets 4 / maxGuest 4Gi: patched onto
    the VMI, no RestartRequired; with Stage both need the restart."""
    vmi = running(domain(maxSockets=4) | {"memory": {"guest": "1Gi", "maxGuest": "4Gi"}})
    template = vm(domain(2, "2Gi"))
    assert hotplug_ops(template, vmi) == [
        {"op": "add", "path": "/spec/domain/cpu/sockets", "value": 2},
        {"op": "add", "path": "/spec/domain/memory/guest", "value": "2Gi"},
    ]
    assert live_ops(template, vmi, LIVE) == hotplug_ops(template, vmi)
    assert restart_fields(template, vmi, LIVE) == []
    assert live_ops(template, vmi, STAGE) == []
    assert restart_fields(template, vmi, STAGE) == [
        "spec.domain.cpu.sockets", "spec.domain.memory.guest",
    ]  # fmt: skip


def test_beyond_the_ceiling_or_shrinking_memory_needs_a_restart() -> None:
    """Above maxSockets / maxGuest, a lower guest memory (never unplugged), a cores change,
    or a VMI without ceilings: no patch, RestartRequired names the field."""
    vmi = running(domain(2, "2Gi", maxSockets=4) | {"memory": {"guest": "2Gi", "maxGuest": "4Gi"}})
    for template, field in (
        (vm(domain(5, "2Gi")), "spec.domain.cpu.sockets"),
        (vm(domain(2, "8Gi")), "spec.domain.memory.guest"),
        (vm(domain(2, "1Gi")), "spec.domain.memory.guest"),
        (vm(domain(3, "2Gi", cores=2)), "spec.domain.cpu.sockets"),
    ):
        assert hotplug_ops(template, vmi) == []
        assert field in restart_fields(template, vmi, LIVE)
    plain = running(domain(1, "1Gi"))
    assert restart_fields(vm(domain(2, "2Gi")), plain, LIVE) == [
        "spec.domain.cpu.sockets", "spec.domain.memory.guest",
    ]  # fmt: skip
