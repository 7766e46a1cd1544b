"""MigrationPolicy: which policy selects a VMI (KubeVirt's precedence: most selector labels,
then name), the limits it makes over the KubeVirt CR's, and its refusals naming the field."""

from __future__ import annotations

from typing import Any

import yaml

from shared.clusterconfig import MigrationLimits
from shared.migrationpolicy import match_policy, policy_configuration, validate_policy, with_policy
from shared.model.crd import POLICY_FILENAME
from shared.model.crd_builders import build_group_crd
from shared.model.migrationpolicy import POLICY_GROUP, POLICY_VERSION, MigrationPolicy
from tests.unit.shared.test_crd_drift import BASE


def policy(name: str, *, vmi: dict[str, str] | None = None, ns: dict[str, str] | None = None,
           **spec: Any) -> MigrationPolicy:  # fmt: skip
    selectors = {"virtualMachineInstanceSelector": vmi or {}, "namespaceSelector": ns or {}}
    return MigrationPolicy.from_dict(
        {"metadata": {"name": name}, "spec": {"selectors": selectors, **spec}}
    )


def test_the_policy_with_most_matching_labels_wins() -> None:
    """A policy matches when every selector label matches; more labels take precedence."""
    broad = policy("broad", ns={"team": "a"})
    narrow = policy("narrow", ns={"team": "a"}, vmi={"tier": "db"})
    other = policy("other", vmi={"tier": "web"})
    found = match_policy(
        [broad, narrow, other], vmi_labels={"tier": "db"}, namespace_labels={"team": "a"}
    )
    assert found is narrow
    assert match_policy([other], vmi_labels={"tier": "db"}, namespace_labels={}) is None


def test_equal_precedence_is_broken_by_name() -> None:
    """Two policies with as many labels: the first by name."""
    b, a = policy("b", vmi={"x": "1"}), policy("a", ns={"y": "2"})
    assert match_policy([b, a], vmi_labels={"x": "1"}, namespace_labels={"y": "2"}) is a


def test_the_policy_values_lay_over_the_cluster_limits() -> None:
    """bandwidthPerMigration, completionTimeoutPerGiB and the switches override; the rest
    stays the CR's."""
    p = policy("p", bandwidthPerMigration="8Mi", allowPostCopy=True, completionTimeoutPerGiB=9)
    limits = with_policy(MigrationLimits(parallel_per_cluster=3), policy_configuration(p))
    assert (limits.bandwidth_mib, limits.completion_timeout_per_gib) == (8, 9)
    assert limits.allow_post_copy and limits.parallel_per_cluster == 3
    assert with_policy(limits, None) == limits


def test_a_bad_policy_is_refused_naming_the_field() -> None:
    """A bandwidth that is no quantity is named under spec."""
    (error,) = validate_policy(policy("p", bandwidthPerMigration="fast"))
    assert error.path == "spec.bandwidthPerMigration"
    assert validate_policy(policy("p", bandwidthPerMigration="1Gi")) == []


def test_the_committed_policy_crd_is_generated() -> None:
    """manifests/base/crd-migrationpolicies.yaml equals what the model generates
    (cluster-scoped, migrations.kubevirt.io/v1alpha1)."""
    crd = build_group_crd(MigrationPolicy, group=POLICY_GROUP, version=POLICY_VERSION)
    assert yaml.safe_load((BASE / POLICY_FILENAME).read_text()) == crd
    assert crd["spec"]["scope"] == "Cluster"
