"""VirtualMachineInstance: spec (domain, volumes, networks, scheduling) and status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from shared.model._codec import Model, json_name
from shared.model.credentials import AccessCredential
from shared.model.devopts import LinkState
from shared.model.domain import DomainSpec
from shared.model.enums import (
    EvictionStrategy,
    MigrationMethod,
    QOSClass,
    StartStrategy,
    VMIPhase,
)
from shared.model.meta import ConditionsMixin, PhaseTransition, VMICondition
from shared.model.migrationstate import MigrationState
from shared.model.objects import KubeObject
from shared.model.probes import Probe
from shared.model.scheduling import (
    Affinity,
    DNSPolicy,
    PodDNSConfig,
    Toleration,
    TopologySpreadConstraint,
)
from shared.model.volmig import StorageMigratedVolumeInfo
from shared.model.volumes import Network, Volume
from shared.model.volumestatus import VolumeStatus

# KubeVirt's default when terminationGracePeriodSeconds is unset.
DEFAULT_GRACE_PERIOD_SECONDS = 30


@dataclass(frozen=True, slots=True, kw_only=True)
class VMISpec(Model):
    """VMI spec (the subset the daemons act on; everything else stays in `extra`)."""

    domain: DomainSpec = field(default_factory=DomainSpec)
    volumes: tuple[Volume, ...] = ()
    networks: tuple[Network, ...] = ()
    termination_grace_period_seconds: int | None = None
    start_strategy: StartStrategy | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    eviction_strategy: EvictionStrategy | None = None
    # Carried to the launcher pod as they are (shared/model/scheduling.py).
    affinity: Affinity | None = None
    tolerations: tuple[Toleration, ...] = ()
    topology_spread_constraints: tuple[TopologySpreadConstraint, ...] = ()
    scheduler_name: str | None = None
    priority_class_name: str | None = None
    hostname: str | None = None
    subdomain: str | None = None
    dns_policy: DNSPolicy | None = None
    dns_config: PodDNSConfig | None = None
    # Run by the kubelet as the launcher pod's probes (shared/model/probes.py).
    readiness_probe: Probe | None = None
    liveness_probe: Probe | None = None
    # SSH keys and passwords from Secrets (shared/model/credentials.py).
    access_credentials: tuple[AccessCredential, ...] = ()

    def volume(self, name: str) -> Volume | None:
        """The volume with this name, if any."""
        return next((v for v in self.volumes if v.name == name), None)

    def network(self, name: str) -> Network | None:
        """The network with this name, if any."""
        return next((n for n in self.networks if n.name == name), None)

    @property
    def starts_paused(self) -> bool:
        """startStrategy: Paused."""
        return self.start_strategy == StartStrategy.PAUSED

    @property
    def grace_period_seconds(self) -> int:
        """terminationGracePeriodSeconds, KubeVirt's 30 s when unset."""
        value = self.termination_grace_period_seconds
        return DEFAULT_GRACE_PERIOD_SECONDS if value is None else value


@dataclass(frozen=True, slots=True, kw_only=True)
class VMIInterfaceStatus(Model):
    """status.interfaces[]."""

    name: str | None = None
    ip_address: str | None = None
    ip_addresses: tuple[str, ...] = ()
    mac: str | None = None
    interface_name: str | None = None
    info_source: str | None = None  # "domain", "guest-agent" or "domain, guest-agent"


@dataclass(frozen=True, slots=True, kw_only=True)
class GuestOSInfo(Model):
    """status.guestOSInfo, as reported by the guest agent."""

    name: str | None = None
    id: str | None = None
    version: str | None = None
    version_id: str | None = None
    pretty_name: str | None = None
    kernel_release: str | None = None
    kernel_version: str | None = None
    machine: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CPUTopology(Model):
    """status.currentCPUTopology: the topology the running guest has (after hotplug)."""

    sockets: int | None = None
    cores: int | None = None
    threads: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryStatus(Model):
    """status.memory: the guest memory at boot, requested (spec) and plugged now."""

    guest_at_boot: str | None = None
    guest_current: str | None = None
    guest_requested: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class VMIStatus(ConditionsMixin[VMICondition], Model):
    """VMI status; build updates with dataclasses.replace / with_condition."""

    phase: VMIPhase | None = None
    conditions: tuple[VMICondition, ...] = ()
    node_name: str | None = None
    reason: str | None = None
    phase_transition_timestamps: tuple[PhaseTransition, ...] = ()
    interfaces: tuple[VMIInterfaceStatus, ...] = ()
    guest_os_info: GuestOSInfo | None = field(default=None, metadata=json_name("guestOSInfo"))
    migration_state: MigrationState | None = None
    active_pods: Mapping[str, str] = field(default_factory=dict)
    qos_class: QOSClass | None = None
    launcher_container_image_version: str | None = None
    migration_method: MigrationMethod | None = None
    volume_status: tuple[VolumeStatus, ...] = ()
    # The node a drain asked this VMI to leave (set at eviction, cleared once it left).
    evacuation_node_name: str | None = None
    fs_freeze_status: str | None = None  # "frozen" while the guest's filesystems are frozen
    current_cpu_topology: CPUTopology | None = field(
        default=None, metadata=json_name("currentCPUTopology")
    )
    memory: MemoryStatus | None = None
    migrated_volumes: tuple[StorageMigratedVolumeInfo, ...] = ()
    # autoattachVSOCK's context ID, unique on the node (the handler allocates it)
    vsock_cid: int | None = field(default=None, metadata=json_name("VSOCKCID"))

    def volume_state(self, name: str) -> VolumeStatus | None:
        """The volumeStatus entry of a volume, if any."""
        return next((v for v in self.volume_status if v.name == name), None)

    @property
    def phase_or_unset(self) -> VMIPhase:
        """The phase, UNSET ("") when absent."""
        return self.phase if self.phase is not None else VMIPhase.UNSET

    def is_final(self) -> bool:
        """Succeeded or Failed."""
        return self.phase_or_unset.is_final()


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineInstance(KubeObject):
    """kubevirt.io/v1 VirtualMachineInstance (vmi)."""

    KIND: ClassVar[str] = "VirtualMachineInstance"
    PLURAL: ClassVar[str] = "virtualmachineinstances"

    spec: VMISpec = field(default_factory=VMISpec)
    status: VMIStatus = field(default_factory=VMIStatus)

    def is_final(self) -> bool:
        """Succeeded or Failed."""
        return self.status.is_final()

    def interface_statuses(
        self, *, pod_ip: str | None, pod_ips: tuple[str, ...] = ()
    ) -> tuple[VMIInterfaceStatus, ...]:
        """status.interfaces from the spec: name, the MAC when the spec pins one, and for
        interfaces on the pod network the pod's IP (masquerade NATs the guest behind it,
        KubeVirt reports it the same way); a masquerade or passt interface on a dual-stack
        pod lists both of the pod's IPs (`pod_ips`, IPv4 first) in ipAddresses."""
        on_pod = {n.name for n in self.spec.networks if n.primary}
        out = []
        for iface in self.spec.domain.devices.interfaces:
            if iface.state == LinkState.ABSENT:
                continue  # hot-unplugged
            ip = pod_ip if iface.name in on_pod else None
            both = iface.masquerade is not None or iface.uses_passt()
            out.append(
                VMIInterfaceStatus(
                    name=iface.name,
                    mac=iface.mac_address,
                    ip_address=ip,
                    ip_addresses=(pod_ips if both and pod_ips else (ip,)) if ip else (),
                )
            )
        return tuple(out)
