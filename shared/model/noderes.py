"""domain.cpu's dedicated-CPU fields and domain.memory.hugepages: what a VMI asks of its
node's CPU manager and hugepages (docs/node-resources.md)."""

from __future__ import annotations

from dataclasses import dataclass

from shared.model._codec import Model


@dataclass(frozen=True, slots=True, kw_only=True)
class NUMAGuestMappingPassthrough(Model):
    """cpu.numa.guestMappingPassthrough: present (``{}``) means on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NUMA(Model):
    """cpu.numa: the guest's NUMA cells mirror the host cells of its pinned CPUs."""

    guest_mapping_passthrough: NUMAGuestMappingPassthrough | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Realtime(Model):
    """cpu.realtime: the vCPUs (those of ``mask``, libvirt's vcpus syntax; unset: all) run
    under SCHED_FIFO."""

    mask: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Hugepages(Model):
    """memory.hugepages: guest memory backed by hugepages of ``pageSize`` (2Mi, 1Gi)."""

    page_size: str | None = None
