"""Which MigrationPolicy applies to a VMI, and the limits it makes (KubeVirt's rules).

A policy matches when the VMI carries every label of its virtualMachineInstanceSelector and
the VMI's namespace every label of its namespaceSelector. Of the matching ones the policy
with the most selector labels wins (KubeVirt's precedence), ties broken by name. The
controller records the winner in the VMI's status.migrationState (migrationPolicyName and
migrationConfiguration) when it hands the migration to the handlers; the source handler lays
that configuration over the KubeVirt CR's limits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from shared.clusterconfig import InvalidKubeVirt, MigrationLimits, resolve_migrations
from shared.model import FieldError
from shared.model.migrationconfig import MigrationConfiguration
from shared.model.migrationpolicy import MigrationPolicy


def _matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def match_policy(
    policies: Iterable[MigrationPolicy],
    *,
    vmi_labels: Mapping[str, str],
    namespace_labels: Mapping[str, str],
) -> MigrationPolicy | None:
    """The policy for a VMI with these labels in a namespace with those; None: no match."""
    best: tuple[int, str] | None = None
    winner = None
    for policy in policies:
        sel = policy.spec.selectors
        vmi_sel, ns_sel = sel.virtual_machine_instance_selector, sel.namespace_selector
        if not _matches(vmi_sel, vmi_labels) or not _matches(ns_sel, namespace_labels):
            continue
        # More selector labels win; among equals the first name.
        rank = (len(vmi_sel) + len(ns_sel), policy.name)
        if best is None or rank[0] > best[0] or (rank[0] == best[0] and rank[1] < best[1]):
            best, winner = rank, policy
    return winner


def policy_configuration(policy: MigrationPolicy) -> MigrationConfiguration:
    """The policy's values as the migrationConfiguration the VMI's migrationState carries."""
    spec = policy.spec
    return MigrationConfiguration(
        bandwidth_per_migration=spec.bandwidth_per_migration,
        completion_timeout_per_gi_b=spec.completion_timeout_per_gi_b,
        allow_auto_converge=spec.allow_auto_converge,
        allow_post_copy=spec.allow_post_copy,
    )


def validate_policy(policy: MigrationPolicy) -> list[FieldError]:
    """Every bad value of a MigrationPolicy, with its spec path (admission)."""
    try:
        resolve_migrations(MigrationLimits(), policy_configuration(policy), base="spec")
    except InvalidKubeVirt as e:
        return list(e.errors)
    return []


def with_policy(
    limits: MigrationLimits, configuration: MigrationConfiguration | None
) -> MigrationLimits:
    """`limits` with what the policy set (a bad value, refused at admission: ignored)."""
    if configuration is None:
        return limits
    try:
        return resolve_migrations(limits, configuration, base="migrationConfiguration")
    except InvalidKubeVirt:
        return limits
