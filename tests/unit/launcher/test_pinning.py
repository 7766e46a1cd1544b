"""Dedicated CPUs, hugepages and guest NUMA in the domain (launcher/pinning.py): vCPUs
pinned 1:1 to the container's cgroup cpuset, the emulator thread on the next CPU when
isolated, realtime refused where the launcher may not use SCHED_FIFO, hugepage memory
backing, one guest cell per host cell; libvirt's schema accepts the result."""

from __future__ import annotations

import dataclasses
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from launcher.domxml import build
from launcher.errors import HypervisorUnsupported
from launcher.libvirtd import qemu_conf
from launcher.pinning import HostView, PinningPlan, parse_cpu_list, plan_pinning
from shared.model import VirtualMachineInstance
from tests.unit.launcher.test_domxml import PLAN

CAP_SYS_NICE_ONLY = f"{1 << 23:016x}"


def _view(tmp_path: Path, *, cpuset: str, v1: bool = False, caps: str = "0") -> HostView:
    cg = tmp_path / "cgroup"
    path = cg / ("cpuset/cpuset.effective_cpus" if v1 else "cpuset.cpus.effective")
    path.parent.mkdir(parents=True)
    path.write_text(f"{cpuset}\n")
    for cell, cpus in ((0, "0-1"), (1, "2-3")):
        node = tmp_path / "node" / f"node{cell}"
        node.mkdir(parents=True)
        (node / "cpulist").write_text(f"{cpus}\n")
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "status").write_text(f"Name:\tx\nCapEff:\t{caps}\n")
    (proc / "sys" / "kernel").mkdir(parents=True)
    (proc / "sys" / "kernel" / "sched_rt_runtime_us").write_text("950000\n")
    return HostView(cgroup_root=cg, node_root=tmp_path / "node", proc=proc)


def _vmi(cpu: dict[str, Any], memory: dict[str, Any] | None = None) -> VirtualMachineInstance:
    domain = {"cpu": cpu, "memory": {"guest": "128Mi", **(memory or {})}}
    return VirtualMachineInstance.from_dict({"metadata": {"name": "v"}, "spec": {"domain": domain}})


def test_cpu_lists_parse_as_the_kernel_writes_them() -> None:
    """Ranges and single CPUs, in order, once each."""
    assert parse_cpu_list("3,0-1,5-6\n") == (0, 1, 3, 5, 6)


@pytest.mark.parametrize("v1", [False, True], ids=["cgroup-v2", "cgroup-v1"])
def test_vcpus_pin_to_the_cpuset_and_the_emulator_goes_apart(tmp_path: Path, v1: bool) -> None:
    """Two vCPUs on the first two CPUs of the container's cpuset, the isolated emulator
    thread on the third, read from either cgroup version's file."""
    view = _view(tmp_path, cpuset="1,3-4", v1=v1)
    vmi = _vmi({"cores": 2, "dedicatedCpuPlacement": True, "isolateEmulatorThread": True})
    plan = plan_pinning(vmi, view=view, vcpus=2, node="n1")
    assert plan is not None and plan.vcpu_pins == (1, 3) and plan.emulator_cpus == "4"


def test_too_few_cpus_fail_naming_the_node(tmp_path: Path) -> None:
    """A cpuset smaller than vCPUs + emulator thread: refused at the node, named."""
    vmi = _vmi({"dedicatedCpuPlacement": True, "isolateEmulatorThread": True})
    with pytest.raises(HypervisorUnsupported, match="node n1"):
        plan_pinning(vmi, view=_view(tmp_path, cpuset="1"), vcpus=1, node="n1")


def test_realtime_needs_sys_nice(tmp_path: Path) -> None:
    """Without CAP_SYS_NICE realtime is refused naming the field; with it, every vCPU
    (no mask) runs under FIFO."""
    vmi = _vmi({"dedicatedCpuPlacement": True, "realtime": {}})
    with pytest.raises(HypervisorUnsupported, match=r"spec\.domain\.cpu\.realtime"):
        plan_pinning(vmi, view=_view(tmp_path / "a", cpuset="1"), vcpus=1, node="n1")
    view = _view(tmp_path / "b", cpuset="1", caps=CAP_SYS_NICE_ONLY)
    plan = plan_pinning(vmi, view=view, vcpus=1, node="n1")
    assert plan is not None and plan.realtime_vcpus == "0-0"


def test_numa_passthrough_mirrors_host_cells(tmp_path: Path) -> None:
    """vCPUs pinned to CPUs of two host cells: two guest cells, each with its vCPUs."""
    vmi = _vmi(
        {"cores": 2, "dedicatedCpuPlacement": True, "numa": {"guestMappingPassthrough": {}}},
        {"hugepages": {"pageSize": "2Mi"}},
    )
    plan = plan_pinning(vmi, view=_view(tmp_path, cpuset="1-2"), vcpus=2, node="n1")
    assert plan is not None and plan.numa_cells == ((0, "0"), (1, "1"))
    assert plan.emulator_cpus == "1,2"  # not isolated: the container's CPUs
    assert plan.hugepage_kib == 2048


def test_nothing_asked_plans_nothing(tmp_path: Path) -> None:
    """No dedicated CPUs and no hugepages: no plan (the cgroup is not even read)."""
    assert plan_pinning(_vmi({}), view=HostView(cgroup_root=tmp_path), vcpus=1, node="") is None


def test_domain_xml_carries_pins_hugepages_and_cells(tmp_path: Path) -> None:
    """<cputune> with vcpupin, emulatorpin and vcpusched, <memoryBacking> hugepages of
    2048 KiB, NUMA cells in <cpu>; virt-xml-validate accepts it."""
    pinning = PinningPlan(
        vcpu_pins=(1,), emulator_cpus="2", realtime_vcpus="0", hugepage_kib=2048,
        numa_cells=((0, "0"),),
    )  # fmt: skip
    xml = build(dataclasses.replace(PLAN, pinning=pinning))
    dom = ET.fromstring(xml)
    assert dom.find("cputune/vcpupin[@vcpu='0']").get("cpuset") == "1"  # type: ignore[union-attr]
    assert dom.find("cputune/emulatorpin").get("cpuset") == "2"  # type: ignore[union-attr]
    assert dom.find("cputune/vcpusched").get("scheduler") == "fifo"  # type: ignore[union-attr]
    assert dom.find("memoryBacking/hugepages/page").get("size") == "2048"  # type: ignore[union-attr]
    assert dom.find("cpu/numa/cell").get("cpus") == "0"  # type: ignore[union-attr]
    path = tmp_path / "domain.xml"
    path.write_text(xml)
    result = subprocess.run(
        ["virt-xml-validate", str(path), "domain"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_qemu_conf_names_the_pods_hugetlbfs() -> None:
    """With the pod's hugepages mount, libvirt is told to put guest memory there."""
    conf = qemu_conf(session=True, cgroups=True, hugetlbfs=Path("/dev/hugepages"))
    assert 'hugetlbfs_mount = "/dev/hugepages"' in conf
    assert "hugetlbfs_mount" not in qemu_conf(session=True, cgroups=True)
