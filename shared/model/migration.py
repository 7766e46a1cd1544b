"""VirtualMachineInstanceMigration and the migration state a VMI carries in its status."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from shared.model._codec import Model, json_name
from shared.model.enums import MigrationAbortStatus, MigrationMode, MigrationPhase
from shared.model.meta import PhaseTransition, _Condition
from shared.model.migrationconfig import MigrationConfiguration
from shared.model.objects import KubeObject


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationSideState(Model):
    """migrationState.sourceState / targetState (KubeVirt 1.7, the fields kubevirt-py
    fills): which VMI and domain a side of a decentralized migration is."""

    virtual_machine_instance_uid: str | None = field(
        default=None, metadata=json_name("virtualMachineInstanceUID")
    )
    # That side's VMIM: on the target side, what names the migration's dir in both
    # launcher pods (handler/migration_proxy.py: the streams' sockets live there).
    migration_uid: str | None = field(default=None, metadata=json_name("migrationUID"))
    domain_name: str | None = None
    domain_namespace: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationState(Model):
    """VMI status.migrationState: the source and target of the current/last migration."""

    source_node: str | None = None
    target_node: str | None = None
    source_pod: str | None = None
    target_pod: str | None = None
    target_node_address: str | None = None
    # The migration proxy's ports on targetNodeAddress: port → stream (handler.migration_proxy)
    target_direct_migration_node_ports: Mapping[str, int] = field(default_factory=dict)
    target_node_domain_detected: bool | None = None
    target_node_domain_ready_timestamp: str | None = None
    start_timestamp: str | None = None
    end_timestamp: str | None = None
    completed: bool | None = None
    failed: bool | None = None
    abort_requested: bool | None = None
    abort_status: MigrationAbortStatus | None = None
    failure_reason: str | None = None
    migration_uid: str | None = None
    mode: MigrationMode | None = None
    # The MigrationPolicy that applies, and its values (shared/migrationpolicy.py).
    migration_policy_name: str | None = None
    migration_configuration: MigrationConfiguration | None = None
    # Decentralized migration: the other VMI (controller/migration/decentral.py).
    source_state: MigrationSideState | None = None
    target_state: MigrationSideState | None = None

    def proxy_uid(self) -> str | None:
        """The UID naming the migration's dir in both launcher pods: the target side's
        VMIM's in a decentralized migration (two VMIMs), else this migration's."""
        target = self.target_state
        if target is not None and target.migration_uid:
            return target.migration_uid
        return self.migration_uid

    def leaves_vmi(self, namespace: str, name: str) -> bool:
        """True when the guest goes to another VMI (a decentralized migration's source)."""
        target = self.target_state
        if target is None or not target.domain_name:
            return False
        return (target.domain_namespace, target.domain_name) != (namespace, name)


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationSendTo(Model):
    """VMIM spec.sendTo: the sending half of a decentralized live migration (KubeVirt 1.7)."""

    migration_id: str | None = field(default=None, metadata=json_name("migrationID"))
    # host:port of the receiving side's synchronization endpoint
    connect_url: str | None = field(default=None, metadata=json_name("connectURL"))


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationReceive(Model):
    """VMIM spec.receive: the receiving half; pairs with a sendTo of the same migrationID."""

    migration_id: str | None = field(default=None, metadata=json_name("migrationID"))


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationSpec(Model):
    """VMIM spec: which VMI (same namespace) to migrate, and where to."""

    vmi_name: str | None = None
    # Node labels the target pod must also match (KubeVirt 1.6). They only restrict: a key
    # the VMI's own nodeSelector sets keeps the VMI's value (controller/services/scheduling).
    added_node_selector: Mapping[str, str] = field(default_factory=dict)
    # Decentralized live migration: typed and validated, refused as not supported yet
    # (shared/model/unsupported.py TYPED_UNSUPPORTED; docs/migration.md).
    send_to: MigrationSendTo | None = None
    receive: MigrationReceive | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationCondition(_Condition):
    """A VMIM condition (KubeVirt's types are lowerCamel: decentralizedMigrationBlocked)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationStatus(Model):
    """VMIM status."""

    phase: MigrationPhase | None = None
    phase_transition_timestamps: tuple[PhaseTransition, ...] = ()
    migration_state: MigrationState | None = None
    conditions: tuple[MigrationCondition, ...] = ()

    def condition(self, type_: str) -> MigrationCondition | None:
        """The condition of that type, if present."""
        return next((c for c in self.conditions if c.type == type_), None)

    @property
    def phase_or_unset(self) -> MigrationPhase:
        """The phase, UNSET when absent."""
        return self.phase if self.phase is not None else MigrationPhase.UNSET


@dataclass(frozen=True, slots=True, kw_only=True)
class VirtualMachineInstanceMigration(KubeObject):
    """kubevirt.io/v1 VirtualMachineInstanceMigration (vmim)."""

    KIND: ClassVar[str] = "VirtualMachineInstanceMigration"
    PLURAL: ClassVar[str] = "virtualmachineinstancemigrations"

    spec: MigrationSpec = field(default_factory=MigrationSpec)
    status: MigrationStatus = field(default_factory=MigrationStatus)

    @property
    def vmi_key(self) -> str:
        """The "namespace/name" key of the VMI this migration moves."""
        name = self.spec.vmi_name or ""
        return f"{self.metadata.namespace}/{name}" if self.metadata.namespace else name

    def is_final(self) -> bool:
        """Succeeded or Failed."""
        return self.status.phase_or_unset.is_final()
