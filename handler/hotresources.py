"""CPU and memory hotplug of a running VMI (KubeVirt's LiveUpdate of sockets and guest memory).

The VM controller copies a changed `cpu.sockets` / `memory.guest` onto the running VMI's
spec (within its maxSockets / maxGuest); here the handler sees the spec differ from what
the status says the guest has, asks the launcher for the new vCPU count and memory size
(launcher/resources.py), and writes `status.currentCPUTopology` and `status.memory` from the
launcher's answer. While a change is under way — the guest's virtio-mem driver plugs memory
block by block, or the launcher refused — the VMI carries `HotVCPUChange` /
`HotMemoryChange` (True); they are removed once the guest has it all. Nothing is done while
the VMI migrates: the target's handler applies what is left once the guest runs there.
"""

from __future__ import annotations

import dataclasses

import structlog

from handler.commands import sync_error
from handler.launchers import LauncherPort
from shared.model import (
    ConditionStatus,
    CPUTopology,
    MemoryStatus,
    VirtualMachineInstance,
    VMICondition,
    VMIConditionType,
    VMIStatus,
)
from shared.model.quantity import format_bytes, parse_bytes
from shared.wire.errors import CommandFailed, ErrorCode, RemoteError, WireError
from shared.wire.launcher_api import Method
from shared.wire.resources import HotplugResourcesArgs, ResourcesReply

log = structlog.get_logger("handler.hotresources")

CPU_KIND = VMIConditionType.HOT_VCPU_CHANGE
MEMORY_KIND = VMIConditionType.HOT_MEMORY_CHANGE
SETTLE_SECONDS = 1.0  # how soon to look again while the guest plugs memory
# Answers that will not change by asking again: out of the domain's bounds, or a launcher
# (of an older image) without the command. Other failures are retried as sync errors.
REFUSALS = frozenset({ErrorCode.INVALID_VMI, ErrorCode.UNKNOWN_METHOD})


def enabled(vmi: VirtualMachineInstance) -> bool:
    """The VMI was started with room to grow (maxSockets or maxGuest in its spec)."""
    domain = vmi.spec.domain
    return domain.cpu.max_sockets is not None or domain.memory.max_guest is not None


def _migrating(vmi: VirtualMachineInstance) -> bool:
    state = vmi.status.migration_state
    return state is not None and not state.completed and not state.failed


def wanted(vmi: VirtualMachineInstance) -> HotplugResourcesArgs | None:
    """What to ask the launcher for, or None when the status already shows the spec."""
    if not enabled(vmi) or _migrating(vmi):
        return None
    domain, status = vmi.spec.domain, vmi.status
    args = HotplugResourcesArgs(vcpus=domain.vcpus(), memory_kib=_memory_kib(vmi))
    topology = status.current_cpu_topology
    cpu_done = topology is not None and topology.sockets == (domain.cpu.sockets or 1)
    memory = status.memory
    memory_done = args.memory_kib is None or (
        memory is not None
        and memory.guest_current is not None
        and parse_bytes(memory.guest_current) // 1024 == args.memory_kib
    )
    return None if cpu_done and memory_done else args


def _memory_kib(vmi: VirtualMachineInstance) -> int | None:
    domain = vmi.spec.domain
    if domain.memory.max_guest is None:
        return None
    return (domain.guest_memory_bytes() or 0) // 1024


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """The launcher's answer; None and why when it refused (the VMI keeps running)."""

    reply: ResourcesReply | None
    refused: str | None = None


async def apply(launcher: LauncherPort, args: HotplugResourcesArgs) -> Outcome:
    """Ask the launcher; a refusal (out of the domain's bounds) is an outcome, not an error."""
    try:
        raw = await launcher.call(Method.HOTPLUG_RESOURCES, args.to_wire())
    except (CommandFailed, RemoteError) as exc:
        if exc.code in REFUSALS:
            log.warning("hotplug_resources_refused", error=exc.message)
            return Outcome(reply=None, refused=exc.message)
        raise sync_error(Method.HOTPLUG_RESOURCES, exc) from exc
    except WireError as exc:
        raise sync_error(Method.HOTPLUG_RESOURCES, exc) from exc
    return Outcome(reply=ResourcesReply.from_wire(raw))


def with_resources(
    vmi: VirtualMachineInstance, status: VMIStatus, outcome: Outcome, *, now: str
) -> VMIStatus:
    """`status` with the guest's current topology and memory, and the Hot*Change
    conditions while the guest lags its spec."""
    domain, reply, refused = vmi.spec.domain, outcome.reply, outcome.refused
    per_socket = (domain.cpu.cores or 1) * (domain.cpu.threads or 1)
    want_memory = _memory_kib(vmi)
    if reply is not None:
        topology = CPUTopology(
            sockets=reply.vcpus // per_socket, cores=domain.cpu.cores or 1,
            threads=domain.cpu.threads or 1,
        )  # fmt: skip
        status = dataclasses.replace(status, current_cpu_topology=topology)
        if reply.memory_current_kib is not None and want_memory is not None:
            memory = MemoryStatus(
                guest_at_boot=format_bytes(reply.memory_boot_kib * 1024),
                guest_current=format_bytes(reply.memory_current_kib * 1024),
                guest_requested=format_bytes(want_memory * 1024),
            )
            status = dataclasses.replace(status, memory=memory)
    cpu_lag = reply is None or reply.vcpus != domain.vcpus()
    memory_lag = want_memory is not None and (
        reply is None or reply.memory_current_kib != want_memory
    )
    status = _put(
        status, CPU_KIND, cpu_lag, why=refused or "the vCPUs are being hot-plugged", now=now
    )
    return _put(
        status, MEMORY_KIND, memory_lag, why=refused or "the guest is plugging memory", now=now
    )


def _put(status: VMIStatus, kind: str, on: bool, *, why: str, now: str) -> VMIStatus:
    existing = status.condition(kind)
    if not on:
        return status if existing is None else status.without_condition(kind)
    if existing is not None and existing.message == why:
        return status
    condition = VMICondition(
        type=kind, status=ConditionStatus.TRUE, message=why, last_transition_time=now
    )
    return status.with_condition(condition)


def settling(outcome: Outcome, status: VMIStatus) -> bool:
    """The guest is still plugging memory the launcher gave it: look again soon. (vCPUs
    are there at once, or left by the launcher: asking again every second would not help.)"""
    return outcome.reply is not None and status.condition_is_true(MEMORY_KIND)
