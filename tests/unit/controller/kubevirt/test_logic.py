"""The KubeVirt CR's status: Deployed and Available, Degraded naming the refused fields."""

from __future__ import annotations

import dataclasses

from controller.config import Config
from controller.kubevirt.live import cluster_defaults, migration_config, template_config
from controller.kubevirt.logic import AVAILABLE, DEGRADED, PHASE_DEPLOYED, plan_status
from shared.clusterconfig import InvalidKubeVirt, resolve
from shared.model import FieldError
from shared.model.kubevirt import KubeVirt

NOW = "2026-11-27T03:00:00Z"
LATER = "2026-11-27T04:00:00Z"


def kubevirt() -> KubeVirt:
    return KubeVirt.from_dict({"metadata": {"name": "kubevirt", "generation": 3}})


def test_a_good_configuration_is_available_and_deployed() -> None:
    """Phase Deployed, Available True, Degraded False, the version and generation observed."""
    status = plan_status(kubevirt(), error=None, version="v0.1.0", now=NOW)
    conditions = {c.type: c.status for c in status.conditions}
    assert status.phase == PHASE_DEPLOYED and status.observed_kube_virt_version == "v0.1.0"
    assert conditions == {AVAILABLE: "True", "Progressing": "False", DEGRADED: "False"}
    assert status.observed_generation == 3


def test_a_refused_configuration_is_degraded_naming_the_field() -> None:
    """Degraded True, its message names the field; Available stays True (the last good
    configuration is in force)."""
    error = InvalidKubeVirt(
        [FieldError(path="spec.configuration.migrations.progressTimeout", message="bad")]
    )
    status = plan_status(kubevirt(), error=error, version="v0.1.0", now=NOW)
    by_type = {c.type: c for c in status.conditions}
    assert by_type[DEGRADED].status == "True"
    assert "spec.configuration.migrations.progressTimeout" in (by_type[DEGRADED].message or "")
    assert by_type[AVAILABLE].status == "True"


def test_transition_times_move_only_on_a_change() -> None:
    """An unchanged condition keeps its lastTransitionTime."""
    kv = kubevirt()
    first = plan_status(kv, error=None, version="v0.1.0", now=NOW)
    again = plan_status(dataclasses.replace(kv, status=first), error=None, version="v", now=LATER)
    assert {c.last_transition_time for c in again.conditions} == {NOW}


def test_the_controller_flags_are_the_defaults_and_the_cr_overrides_them() -> None:
    """Flags → ClusterConfig defaults; the CR's values reach the migration and template
    configs the loops read."""
    config = Config.from_args(
        ["--parallel-migrations", "3", "--cpu-allocation-ratio", "4", "--feature-gates", "A,B"],
        environ={},
    )
    defaults = cluster_defaults(config)
    assert defaults.migrations.parallel_per_cluster == 3
    assert defaults.cpu_allocation_ratio == 4 and defaults.feature_gates == {"A", "B"}
    cr = KubeVirt.from_dict(
        {
            "spec": {
                "configuration": {
                    "migrations": {"parallelMigrationsPerCluster": 1},
                    "developerConfiguration": {"cpuAllocationRatio": 2, "useEmulation": False},
                    "evictionStrategy": "LiveMigrate",
                }
            }
        }
    )
    cluster = resolve(defaults, cr)
    migration = migration_config(config.migration, cluster)
    assert migration.parallel_per_cluster == 1 and migration.eviction_strategy == "LiveMigrate"
    template = template_config(config.template, cluster)
    assert template.cpu_request_millis_per_vcpu == 500 and not template.use_emulation
