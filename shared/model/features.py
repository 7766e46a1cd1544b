"""domain.features beside smm: acpi, apic, the Hyper-V enlightenments, kvm (hidden),
pvspinlock and hypervPassthrough, as KubeVirt's kubevirt.io/v1 has them.

Every switch is "on unless enabled is false" (KubeVirt's FeatureState); the Hyper-V ones,
kvm.hidden, pvspinlock and hypervPassthrough need KVM (launcher/features.py refuses them
on a node that only emulates).
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.model._codec import Model


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureSpinlocks(Model):
    """hyperv.spinlocks: retries before the guest yields (at least 4096; default 4096)."""

    enabled: bool | None = None
    spinlocks: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureVendorID(Model):
    """hyperv.vendorid: the hypervisor vendor id the guest reads (up to 12 characters)."""

    enabled: bool | None = None
    vendorid: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureToggle(Model):
    """An on/off switch (a Hyper-V enlightenment, synictimer.direct)."""

    enabled: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SyNICTimer(Model):
    """hyperv.synictimer, with its direct mode."""

    enabled: bool | None = None
    direct: FeatureToggle | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TLBFlush(Model):
    """hyperv.tlbflush, with its direct and extended modes (QEMU CPU properties: libvirt
    9.0 has no element for them, launcher/qemuns.py)."""

    enabled: bool | None = None
    direct: FeatureToggle | None = None
    extended: FeatureToggle | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureHyperv(Model):
    """features.hyperv: each enlightenment KubeVirt's API lists."""

    relaxed: FeatureToggle | None = None
    vapic: FeatureToggle | None = None
    spinlocks: FeatureSpinlocks | None = None
    vpindex: FeatureToggle | None = None
    runtime: FeatureToggle | None = None
    synic: FeatureToggle | None = None
    synictimer: SyNICTimer | None = None
    reset: FeatureToggle | None = None
    vendorid: FeatureVendorID | None = None
    frequencies: FeatureToggle | None = None
    reenlightenment: FeatureToggle | None = None
    tlbflush: TLBFlush | None = None
    ipi: FeatureToggle | None = None
    evmcs: FeatureToggle | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureAPIC(Model):
    """features.apic, with the end-of-interrupt notification."""

    enabled: bool | None = None
    end_of_interrupt: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureKVM(Model):
    """features.kvm: hide KVM from the guest's MSR-based discovery."""

    hidden: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HyperVPassthrough(Model):
    """features.hypervPassthrough: every enlightenment the host has (not migratable)."""

    enabled: bool | None = None


def is_on(switch: Model | None) -> bool:
    """A switch that is set and not disabled (`enabled` unset counts as on)."""
    return switch is not None and getattr(switch, "enabled", None) is not False


def is_off(switch: Model | None) -> bool:
    """A switch that is set and disabled."""
    return switch is not None and getattr(switch, "enabled", None) is False
