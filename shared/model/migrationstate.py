"""The migration state a VMI carries in its status (status.migrationState), and a VMIM in
its own: a module apart from the VMIM's so that a VMI's model (the launcher's) loads no VMIM
model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from shared.model._codec import Model, json_name
from shared.model.enums import MigrationAbortStatus, MigrationMode
from shared.model.migrationconfig import MigrationConfiguration


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
        """True when the guest goes to another VMI (a decentralized migration's source): one
        of another name, or of another VMIM (another cluster's VMI may have the same name)."""
        target = self.target_state
        if target is None or not target.domain_name:
            return False
        other_vmim = bool(target.migration_uid) and target.migration_uid != self.migration_uid
        return other_vmim or (target.domain_namespace, target.domain_name) != (namespace, name)
