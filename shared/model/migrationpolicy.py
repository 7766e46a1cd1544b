"""migrations.kubevirt.io/v1alpha1 MigrationPolicy (cluster-scoped): migration limits for
the VMIs its selectors match, over the KubeVirt CR's (shared/migrationpolicy.py matches)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from shared.model._codec import Model, json_name
from shared.model.objects import KubeObject

POLICY_GROUP = "migrations.kubevirt.io"
POLICY_VERSION = "v1alpha1"


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySelectors(Model):
    """spec.selectors: labels every one of which the namespace / the VMI must carry."""

    namespace_selector: Mapping[str, str] = field(default_factory=dict)
    virtual_machine_instance_selector: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationPolicySpec(Model):
    """MigrationPolicy spec (KubeVirt's fields; bandwidthPerMigration is a quantity)."""

    selectors: PolicySelectors = field(default_factory=PolicySelectors)
    allow_auto_converge: bool | None = None
    bandwidth_per_migration: str | None = None
    completion_timeout_per_gi_b: int | None = field(
        default=None, metadata=json_name("completionTimeoutPerGiB")
    )
    allow_post_copy: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationPolicyStatus(Model):
    """MigrationPolicy status (empty in KubeVirt)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationPolicy(KubeObject):
    """migrations.kubevirt.io/v1alpha1 MigrationPolicy: limits for the VMIs it selects."""

    KIND: ClassVar[str] = "MigrationPolicy"
    PLURAL: ClassVar[str] = "migrationpolicies"
    SINGULAR: ClassVar[str] = "migrationpolicy"
    SHORT_NAMES: ClassVar[tuple[str, ...]] = ()
    NAMESPACED: ClassVar[bool] = False

    spec: MigrationPolicySpec = field(default_factory=MigrationPolicySpec)
    status: MigrationPolicyStatus = field(default_factory=MigrationPolicyStatus)
