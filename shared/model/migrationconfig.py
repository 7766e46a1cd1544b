"""The migration parameters (KubeVirt's `MigrationConfiguration`): the KubeVirt CR's
spec.configuration.migrations, and the values a MigrationPolicy resolved to in a VMI's
status.migrationState.

A module of its own so that a VMI's model (the launcher's) loads no KubeVirt CR model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.model._codec import Model, json_name


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationConfiguration(Model):
    """spec.configuration.migrations (bandwidthPerMigration is a quantity, e.g. "64Mi")."""

    parallel_migrations_per_cluster: int | None = None
    parallel_outbound_migrations_per_node: int | None = None
    bandwidth_per_migration: str | None = None
    completion_timeout_per_gi_b: int | None = field(
        default=None, metadata=json_name("completionTimeoutPerGiB")
    )
    progress_timeout: int | None = None
    allow_auto_converge: bool | None = None
    allow_post_copy: bool | None = None
    # A NetworkAttachmentDefinition in the KubeVirt CR's namespace: the handlers' migration
    # proxies use its interface (`migration0`) instead of the pod network (shared/mignet.py).
    network: str | None = None
