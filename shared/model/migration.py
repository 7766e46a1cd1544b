"""VirtualMachineInstanceMigration (the migration state it shares with a VMI's status is
shared.model.migrationstate's)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from shared.model._codec import Model, json_name
from shared.model.enums import MigrationPhase
from shared.model.meta import PhaseTransition, _Condition
from shared.model.migrationstate import MigrationState
from shared.model.objects import KubeObject


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
    # Decentralized live migration (docs/migration.md): in one cluster or with another
    # (connectURL: the receiving controller's synchronization endpoint).
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
    # A receiving VMIM's: where the sending cluster's controller dials (KubeVirt's field).
    synchronization_addresses: tuple[str, ...] = ()

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
