"""The launcher pod for dedicated CPUs and hugepages (KubeVirt's rules, docs/node-resources.md).

- ``dedicatedCpuPlacement``: the pod is Guaranteed (every container's CPU and memory
  requests equal its limits) and the compute container asks for whole CPUs: the VMI's CPU
  request if it set one, else one per vCPU, one more with ``isolateEmulatorThread`` for
  the emulator thread. The kubelet's static CPU manager then gives the container CPUs of
  its own, which the launcher reads from its cgroup and pins the vCPUs to.
- ``memory.hugepages``: the compute container asks for ``hugepages-<size>`` of the guest's
  size (request = limit, as Kubernetes wants), its memory request shrinks to the overhead,
  and a hugetlbfs emptyDir of that page size is mounted at /dev/hugepages.
"""

from __future__ import annotations

from typing import Any

from shared import podlayout
from shared.launcherpod import COMPUTE_CONTAINER
from shared.model import VirtualMachineInstance
from shared.model.quantity import parse_bytes, parse_millis

# Containers other than compute that name no CPU or memory: what a Guaranteed pod gives them.
SIDECAR_CPU = "10m"
SIDECAR_MEMORY = "40Mi"
_PAGE_NAMES = {2 << 20: "2Mi", 1 << 30: "1Gi"}


def hugepage_size_name(page_size: str) -> str:
    """The page size as the kubelet names it (``hugepages-2Mi``'s ``2Mi``)."""
    size = parse_bytes(page_size)
    return _PAGE_NAMES.get(size, page_size)


def dedicated_cpus(vmi: VirtualMachineInstance) -> int:
    """Whole CPUs the compute container asks for (KubeVirt's rule)."""
    domain = vmi.spec.domain
    asked = domain.resources.requests.cpu or domain.resources.limits.cpu
    cpus = parse_millis(asked) // 1000 if asked is not None else domain.vcpus()
    return cpus + (1 if domain.cpu.isolate_emulator_thread else 0)


def compute_resources(
    vmi: VirtualMachineInstance, resources: dict[str, dict[str, str]], *, overhead: int
) -> dict[str, dict[str, str]]:
    """``resources`` (TemplateService's) for dedicated CPUs and hugepages; as is otherwise."""
    domain = vmi.spec.domain
    requests, limits = dict(resources["requests"]), dict(resources["limits"])
    hugepages = domain.memory.hugepages
    if hugepages is not None and hugepages.page_size:
        name = f"hugepages-{hugepage_size_name(hugepages.page_size)}"
        requests[name] = limits[name] = str(domain.guest_memory_bytes() or 0)
        requests["memory"] = str(overhead)  # the guest's memory is in the hugepages
        if "memory" in limits:
            limits["memory"] = str(overhead)
    if domain.cpu.dedicated_cpu_placement:
        requests["cpu"] = limits["cpu"] = str(dedicated_cpus(vmi))
        memory = max(int(requests["memory"]), int(limits.get("memory", "0")))
        requests["memory"] = limits["memory"] = str(memory)
    return {"requests": requests, "limits": limits}


def apply_pod(vmi: VirtualMachineInstance, spec: dict[str, Any]) -> None:
    """The hugetlbfs volume and mount, and Guaranteed sidecars, on the pod's spec."""
    domain = vmi.spec.domain
    hugepages = domain.memory.hugepages
    if hugepages is not None and hugepages.page_size:
        medium = f"HugePages-{hugepage_size_name(hugepages.page_size)}"
        spec["volumes"].append({"name": podlayout.HUGEPAGES_VOLUME, "emptyDir": {"medium": medium}})
        for container in spec["containers"]:
            if container["name"] == COMPUTE_CONTAINER:
                mount = {"name": podlayout.HUGEPAGES_VOLUME, "mountPath": podlayout.HUGEPAGES_DIR}
                container["volumeMounts"].append(mount)
    if domain.cpu.dedicated_cpu_placement:
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            if container["name"] != COMPUTE_CONTAINER:
                _guarantee(container)


def _guarantee(container: dict[str, Any]) -> None:
    """Requests equal to limits for CPU and memory (the larger memory of the two)."""
    resources = container.setdefault("resources", {})
    requests = resources.setdefault("requests", {})
    limits = resources.setdefault("limits", {})
    cpu = limits.get("cpu") or requests.get("cpu") or SIDECAR_CPU
    memory = max(
        (q for q in (requests.get("memory"), limits.get("memory")) if q),
        key=parse_bytes,
        default=SIDECAR_MEMORY,
    )
    requests["cpu"] = limits["cpu"] = cpu
    requests["memory"] = limits["memory"] = memory
