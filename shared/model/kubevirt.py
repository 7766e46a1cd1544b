"""kubevirt.io/v1 KubeVirt: the one cluster-wide configuration object (`kv kubevirt` in the
namespace the daemons run in), with the part of KubeVirt's `KubeVirtSpec` /
`KubeVirtConfiguration` that kubevirt-py reads; every other key round-trips in `extra`.

The daemons read it through an informer and apply it live (shared/clusterconfig.py); the
controller writes its status (controller/kubevirt/).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from shared.model._codec import Model, json_name
from shared.model.binding import NetworkConfiguration
from shared.model.meta import VMCondition
from shared.model.migrationconfig import MigrationConfiguration
from shared.model.objects import KubeObject
from shared.model.selector import LabelSelector

KUBEVIRT_NAME = "kubevirt"


@dataclass(frozen=True, slots=True, kw_only=True)
class DeveloperConfiguration(Model):
    """spec.configuration.developerConfiguration."""

    feature_gates: tuple[str, ...] = ()
    use_emulation: bool | None = None
    cpu_allocation_ratio: int | None = None
    memory_overcommit: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveUpdateConfiguration(Model):
    """spec.configuration.liveUpdateConfiguration: the ceilings of live CPU/memory changes."""

    max_cpu_sockets: int | None = None
    max_guest: str | None = None
    max_hotplug_ratio: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomProfile(Model):
    """spec.configuration.seccompConfiguration.virtualMachineInstanceProfile.customProfile:
    a Localhost profile under the kubelet's seccomp dir, or the runtime's default (one)."""

    localhost_profile: str | None = None
    runtime_default_profile: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineInstanceProfile(Model):
    """spec.configuration.seccompConfiguration.virtualMachineInstanceProfile."""

    custom_profile: CustomProfile | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SeccompConfiguration(Model):
    """spec.configuration.seccompConfiguration: the launcher pods' seccomp profile."""

    virtual_machine_instance_profile: VirtualMachineInstanceProfile | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DisableSerialConsoleLog(Model):
    """virtualMachineOptions.disableSerialConsoleLog: present (`{}`) means off (no fields)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineOptions(Model):
    """spec.configuration.virtualMachineOptions (disableFreePageReporting stays in
    `extra`)."""

    disable_serial_console_log: DisableSerialConsoleLog | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangedBlockTrackingSelectors(Model):
    """spec.configuration.changedBlockTrackingLabelSelectors: the VMs with changed block
    tracking (incremental backups: controller/backup/), by their labels or their
    namespace's."""

    namespace_label_selector: LabelSelector | None = None
    virtual_machine_label_selector: LabelSelector | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeVirtConfiguration(Model):
    """spec.configuration."""

    developer_configuration: DeveloperConfiguration | None = None
    migrations: MigrationConfiguration | None = None
    eviction_strategy: str | None = None
    vm_rollout_strategy: str | None = None
    live_update_configuration: LiveUpdateConfiguration | None = None
    seccomp_configuration: SeccompConfiguration | None = None
    virtual_machine_options: VirtualMachineOptions | None = None
    # The class of each VM's persistent-state claim (persistent TPM / EFI, shared/vmstate.py).
    vm_state_storage_class: str | None = None
    # CPU models the node labeller never labels (KubeVirt's map of name to true).
    obsolete_cpu_models: Mapping[str, bool] = field(
        default_factory=dict, metadata=json_name("obsoleteCPUModels")
    )
    changed_block_tracking_label_selectors: ChangedBlockTrackingSelectors | None = None
    network: NetworkConfiguration | None = None  # binding plugins (shared/netbinding.py)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadUpdateStrategy(Model):
    """spec.workloadUpdateStrategy: how running VMIs reach a new launcher image."""

    workload_update_methods: tuple[str, ...] = ()
    batch_eviction_size: int | None = None
    batch_eviction_interval: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeVirtSpec(Model):
    """KubeVirt spec."""

    configuration: KubeVirtConfiguration | None = None
    workload_update_strategy: WorkloadUpdateStrategy | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeVirtStatus(Model):
    """KubeVirt status, written by the controller (virt-operator's fields)."""

    phase: str | None = None
    conditions: tuple[VMCondition, ...] = ()
    observed_kube_virt_version: str | None = None
    target_kube_virt_version: str | None = None
    observed_generation: int | None = None
    outdated_virtual_machine_instance_workloads: int | None = None
    # The leader controller's synchronization endpoint ("ip:9185"), decentralized migration.
    synchronization_addresses: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeVirt(KubeObject):
    """kubevirt.io/v1 KubeVirt: the cluster's kubevirt-py configuration (kv)."""

    KIND: ClassVar[str] = "KubeVirt"
    PLURAL: ClassVar[str] = "kubevirts"

    spec: KubeVirtSpec = field(default_factory=KubeVirtSpec)
    status: KubeVirtStatus = field(default_factory=KubeVirtStatus)
