"""Validation of the node-resource fields (KubeVirt's rules): dedicated CPUs want whole
CPUs (a fractional request or limit cannot be pinned), and the emulator-thread, realtime
and guest-NUMA settings want dedicated CPUs; hugepages must fit the guest memory a whole
number of times; guest NUMA passthrough wants hugepages too (KubeVirt's rule)."""

from __future__ import annotations

import re

from shared.model._validate_common import Errors
from shared.model.domain import DomainSpec
from shared.model.errors import QuantityError
from shared.model.quantity import parse_bytes, parse_millis

MASK = re.compile(r"^\^?\d+(-\d+)?(,\^?\d+(-\d+)?)*$")  # libvirt's vcpus syntax: 0-3,^2


def dedicated(domain: DomainSpec) -> bool:
    return bool(domain.cpu.dedicated_cpu_placement)


def validate_node_resources(errs: Errors, path: str, domain: DomainSpec) -> None:
    """Every problem with the dedicated-CPU, realtime, NUMA and hugepages fields."""
    cpu, where = domain.cpu, f"{path}.cpu"
    if not dedicated(domain):
        for key, value in (
            ("isolateEmulatorThread", cpu.isolate_emulator_thread),
            ("realtime", cpu.realtime),
            ("numa.guestMappingPassthrough", cpu.numa and cpu.numa.guest_mapping_passthrough),
        ):
            if value:
                errs.add(f"{where}.{key}", "needs dedicatedCpuPlacement: true")
    else:
        _whole_cpus(errs, path, domain)
        if (cpu.max_sockets or 0) > (cpu.sockets or 1):
            errs.add(f"{where}.maxSockets", "cannot add vCPUs to dedicated CPUs", cpu.max_sockets)
    if cpu.realtime is not None and cpu.realtime.mask and not MASK.match(cpu.realtime.mask):
        errs.add(f"{where}.realtime.mask", "must list vCPUs as 0-3,^2 does", cpu.realtime.mask)
    passthrough = cpu.numa is not None and cpu.numa.guest_mapping_passthrough is not None
    if passthrough and domain.memory.hugepages is None:
        errs.add(f"{where}.numa.guestMappingPassthrough", "needs memory.hugepages")
    _hugepages(errs, path, domain)


def _whole_cpus(errs: Errors, path: str, domain: DomainSpec) -> None:
    """Dedicated CPUs: CPU request and limit whole CPUs, and equal when both are set."""
    found: dict[str, int] = {}
    for kind, value in (
        ("requests", domain.resources.requests.cpu),
        ("limits", domain.resources.limits.cpu),
    ):
        if value is None:
            continue
        field = f"{path}.resources.{kind}.cpu"
        try:
            millis = parse_millis(value)
        except QuantityError:
            continue  # reported by the resources' own validation
        if millis % 1000 or millis <= 0:
            errs.add(field, "must be a whole number of CPUs with dedicatedCpuPlacement", value)
        found[kind] = millis
    if len(found) == 2 and found["requests"] != found["limits"]:
        errs.add(
            f"{path}.resources.limits.cpu",
            "must equal requests.cpu with dedicatedCpuPlacement",
            domain.resources.limits.cpu,
        )


def _hugepages(errs: Errors, path: str, domain: DomainSpec) -> None:
    hugepages = domain.memory.hugepages
    if hugepages is None:
        return
    field = f"{path}.memory.hugepages.pageSize"
    try:
        size = parse_bytes(hugepages.page_size or "")
        guest = domain.guest_memory_bytes()
    except QuantityError:
        errs.add(field, "must be a page size such as 2Mi or 1Gi", hugepages.page_size)
        return
    if size <= 0:
        errs.add(field, "must be a page size such as 2Mi or 1Gi", hugepages.page_size)
    elif guest is not None and size > guest:
        errs.add(field, "must not be larger than the guest memory", hugepages.page_size)
    elif guest is not None and guest % size:
        errs.add(field, "must divide the guest memory", hugepages.page_size)
    if domain.memory.max_guest is not None:
        errs.add(f"{path}.memory.maxGuest", "cannot grow memory backed by hugepages")
