"""Dedicated CPUs, hugepages and guest NUMA in the domain (docs/node-resources.md).

The kubelet's static CPU manager gives a Guaranteed container CPUs of its own and writes
them to the container's cgroup; the launcher reads them there (cgroup v2's
``cpuset.cpus.effective``, v1's ``cpuset.effective_cpus``: KubeVirt reads the same) and
pins vCPU i to the i-th CPU, in order; with ``isolateEmulatorThread`` the emulator threads
get the next CPU, apart from every vCPU (without it, any of the container's CPUs).
``realtime`` runs the masked vCPUs under SCHED_FIFO where the launcher may (CAP_SYS_NICE
and a realtime budget); elsewhere the node refuses it (``HypervisorUnsupported``, which
fails the VMI naming the field and the node). ``memory.hugepages`` backs guest memory with
files on the pod's hugetlbfs, and ``numa.guestMappingPassthrough`` gives the guest one
NUMA cell per host cell of its pinned CPUs.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from launcher.errors import HypervisorUnsupported
from shared.model import VirtualMachineInstance
from shared.model.quantity import parse_bytes

CGROUP_ROOT = Path("/sys/fs/cgroup")
CPUSET_FILES = ("cpuset.cpus.effective", "cpuset/cpuset.effective_cpus")
NODE_ROOT = Path("/sys/devices/system/node")
CAP_SYS_NICE = 23


@dataclass(frozen=True, slots=True, kw_only=True)
class HostView:
    """Where the launcher reads its CPUs, the host's NUMA cells and its own limits."""

    cgroup_root: Path = CGROUP_ROOT
    node_root: Path = NODE_ROOT
    proc: Path = Path("/proc")


@dataclass(frozen=True, slots=True, kw_only=True)
class PinningPlan:
    vcpu_pins: tuple[int, ...] = ()  # host CPU of vCPU i
    emulator_cpus: str | None = None  # libvirt's cpuset syntax
    realtime_vcpus: str | None = None  # libvirt's vcpus syntax
    hugepage_kib: int | None = None
    numa_cells: tuple[tuple[int, str], ...] = ()  # (host cell, guest vCPUs in it)


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """``0-2,5`` → (0, 1, 2, 5)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return tuple(sorted(set(cpus)))


def container_cpuset(view: HostView) -> tuple[int, ...]:
    """The CPUs the container's cgroup allows (the kubelet's exclusive ones)."""
    for name in CPUSET_FILES:
        path = view.cgroup_root / name
        if path.exists():
            return parse_cpu_list(path.read_text())
    raise HypervisorUnsupported("no cpuset cgroup file to read the container's CPUs from", {})


def host_cells(view: HostView) -> dict[int, int]:
    """Host CPU → NUMA cell (all in cell 0 when sysfs shows none)."""
    cells: dict[int, int] = {}
    for node in sorted(view.node_root.glob("node[0-9]*")):
        for cpu in parse_cpu_list((node / "cpulist").read_text()):
            cells[cpu] = int(node.name.removeprefix("node"))
    return cells


def realtime_allowed(view: HostView) -> bool:
    """CAP_SYS_NICE in the launcher's effective set and a realtime budget for its tasks."""
    status = (view.proc / "self" / "status").read_text()
    caps = next((ln.split()[1] for ln in status.splitlines() if ln.startswith("CapEff:")), "0")
    if not (int(caps, 16) >> CAP_SYS_NICE) & 1:
        return False
    budget = view.proc / "sys" / "kernel" / "sched_rt_runtime_us"
    return not budget.exists() or int(budget.read_text()) != 0


def plan_pinning(
    vmi: VirtualMachineInstance, *, view: HostView, vcpus: int, node: str
) -> PinningPlan | None:
    """The plan for this VMI on this node; None when it asks none of these."""
    domain = vmi.spec.domain
    cpu, hugepages = domain.cpu, domain.memory.hugepages
    if not cpu.dedicated_cpu_placement and hugepages is None:
        return None
    page_kib = parse_bytes(hugepages.page_size or "2Mi") // 1024 if hugepages else None
    if not cpu.dedicated_cpu_placement:
        return PinningPlan(hugepage_kib=page_kib)
    cpuset = container_cpuset(view)
    isolate = bool(cpu.isolate_emulator_thread)
    if len(cpuset) < vcpus + isolate:
        raise HypervisorUnsupported(
            f"spec.domain.cpu.dedicatedCpuPlacement: the container's CPUs {list(cpuset)} on "
            f"node {node} are fewer than {vcpus + isolate} (vCPUs, emulator thread)",
            {"node": node, "fields": [{"path": "spec.domain.cpu.dedicatedCpuPlacement"}]},
        )
    realtime = None
    if cpu.realtime is not None:
        if not realtime_allowed(view):
            raise HypervisorUnsupported(
                f"spec.domain.cpu.realtime: node {node} does not let the launcher run vCPUs "
                "under SCHED_FIFO (no CAP_SYS_NICE or no realtime budget)",
                {"node": node, "fields": [{"path": "spec.domain.cpu.realtime"}]},
            )
        realtime = cpu.realtime.mask or f"0-{vcpus - 1}"
    pins = cpuset[:vcpus]
    numa = cpu.numa is not None and cpu.numa.guest_mapping_passthrough is not None
    return PinningPlan(
        vcpu_pins=pins,
        emulator_cpus=str(cpuset[vcpus]) if isolate else ",".join(map(str, cpuset)),
        realtime_vcpus=realtime,
        hugepage_kib=page_kib,
        numa_cells=_cells(pins, host_cells(view)) if numa else (),
    )


def _cells(pins: tuple[int, ...], cells: dict[int, int]) -> tuple[tuple[int, str], ...]:
    by_cell: dict[int, list[int]] = {}
    for vcpu, host_cpu in enumerate(pins):
        by_cell.setdefault(cells.get(host_cpu, 0), []).append(vcpu)
    return tuple((cell, ",".join(map(str, v))) for cell, v in sorted(by_cell.items()))


def render(dom: ET.Element, cpu: ET.Element, plan: PinningPlan, *, memory_kib: int) -> None:
    """<cputune>, <memoryBacking> and the guest's NUMA cells (libvirt's schema interleaves
    the domain's children, so they follow the <cpu> element)."""
    if plan.vcpu_pins:
        tune = ET.SubElement(dom, "cputune")
        for vcpu, host_cpu in enumerate(plan.vcpu_pins):
            ET.SubElement(tune, "vcpupin", vcpu=str(vcpu), cpuset=str(host_cpu))
        if plan.emulator_cpus is not None:
            ET.SubElement(tune, "emulatorpin", cpuset=plan.emulator_cpus)
        if plan.realtime_vcpus is not None:
            attrs = {"vcpus": plan.realtime_vcpus, "scheduler": "fifo", "priority": "1"}
            ET.SubElement(tune, "vcpusched", attrs)
    if plan.hugepage_kib is not None:
        backing = ET.SubElement(dom, "memoryBacking")
        pages = ET.SubElement(backing, "hugepages")
        ET.SubElement(pages, "page", size=str(plan.hugepage_kib), unit="KiB")
    if plan.numa_cells:
        numa = ET.SubElement(cpu, "numa")
        share = memory_kib // len(plan.numa_cells)
        for i, (_, vcpus) in enumerate(plan.numa_cells):
            ET.SubElement(numa, "cell", id=str(i), cpus=vcpus, memory=str(share), unit="KiB")
