"""The live cluster configuration: the KubeVirt CR over the flag defaults; a bad CR keeps
the last good configuration and names every bad field."""

from __future__ import annotations

from typing import Any

import pytest

from shared.clusterconfig import (
    ClusterConfig,
    InvalidKubeVirt,
    LiveConfig,
    MigrationLimits,
    RolloutStrategy,
    effective,
    resolve,
    validate_kubevirt,
)
from shared.model import EvictionStrategy
from shared.model.kubevirt import KubeVirt


def kv(configuration: dict[str, Any], *, name: str = "kubevirt", created: str = "") -> KubeVirt:
    meta: dict[str, Any] = {"name": name, "namespace": "kubevirt", "generation": 1}
    if created:
        meta["creationTimestamp"] = created
    return KubeVirt.from_dict({"metadata": meta, "spec": {"configuration": configuration}})


def test_unset_fields_keep_the_flag_defaults() -> None:
    """A CR that sets only the bandwidth keeps every other value of the defaults."""
    defaults = ClusterConfig(feature_gates=frozenset({"Sidecar"}), cpu_allocation_ratio=4)
    config = resolve(defaults, kv({"migrations": {"bandwidthPerMigration": "64Mi"}}))
    assert config.migrations.bandwidth_mib == 64
    assert config.feature_gates == {"Sidecar"} and config.cpu_allocation_ratio == 4
    assert config.migrations.parallel_per_cluster == MigrationLimits().parallel_per_cluster


def test_every_supported_field_is_read() -> None:
    """developerConfiguration, migrations, evictionStrategy and vmRolloutStrategy apply."""
    config = resolve(
        ClusterConfig(),
        kv(
            {
                "developerConfiguration": {
                    "featureGates": ["Sidecar"],
                    "useEmulation": False,
                    "cpuAllocationRatio": 2,
                    "memoryOvercommit": 150,
                },
                "migrations": {
                    "parallelMigrationsPerCluster": 1,
                    "parallelOutboundMigrationsPerNode": 1,
                    "completionTimeoutPerGiB": 30,
                    "progressTimeout": 20,
                    "allowAutoConverge": True,
                    "allowPostCopy": True,
                },
                "evictionStrategy": "LiveMigrate",
                "vmRolloutStrategy": "Stage",
            }
        ),
    )
    assert config.gate("Sidecar") and not config.use_emulation
    assert (config.cpu_allocation_ratio, config.memory_overcommit) == (2, 150)
    assert config.migrations == MigrationLimits(
        parallel_per_cluster=1,
        outbound_per_node=1,
        completion_timeout_per_gib=30,
        progress_timeout=20,
        allow_auto_converge=True,
        allow_post_copy=True,
    )
    assert config.eviction_strategy is EvictionStrategy.LIVE_MIGRATE
    assert config.vm_rollout_strategy is RolloutStrategy.STAGE


def test_an_empty_gate_list_turns_the_default_gates_off() -> None:
    """featureGates: [] is the whole list, as in KubeVirt (not "keep the defaults")."""
    config = resolve(
        ClusterConfig(feature_gates=frozenset({"Sidecar"})),
        kv({"developerConfiguration": {"featureGates": []}}),
    )
    assert not config.gate("Sidecar")


@pytest.mark.parametrize(
    ("configuration", "path"),
    [
        ({"migrations": {"bandwidthPerMigration": "fast"}}, "migrations.bandwidthPerMigration"),
        ({"migrations": {"parallelMigrationsPerCluster": 0}}, "parallelMigrationsPerCluster"),
        ({"migrations": {"progressTimeout": -1}}, "migrations.progressTimeout"),
        ({"developerConfiguration": {"cpuAllocationRatio": 0}}, "cpuAllocationRatio"),
        ({"developerConfiguration": {"memoryOvercommit": 5}}, "memoryOvercommit"),
        ({"evictionStrategy": "Sometimes"}, "spec.configuration.evictionStrategy"),
        ({"vmRolloutStrategy": "Rolling"}, "spec.configuration.vmRolloutStrategy"),
    ],
)
def test_bad_values_are_named(configuration: dict[str, Any], path: str) -> None:
    """Each bad value is reported with its field path."""
    errors = validate_kubevirt(kv(configuration))
    assert errors and any(path in e.path for e in errors), errors


def test_a_bad_cr_keeps_the_last_good_configuration() -> None:
    """An invalid change leaves the configuration in force and is kept as the error; a
    good one afterwards clears it and applies."""
    live = LiveConfig(ClusterConfig())
    seen: list[ClusterConfig] = []
    live.on_change(seen.append)
    live.apply(kv({"migrations": {"bandwidthPerMigration": "8Mi"}}))
    live.apply(kv({"migrations": {"bandwidthPerMigration": "lots"}}))
    assert live.current().migrations.bandwidth_mib == 8
    assert isinstance(live.error, InvalidKubeVirt)
    live.apply(kv({"migrations": {"bandwidthPerMigration": "16Mi"}}))
    assert live.error is None and live.current().migrations.bandwidth_mib == 16
    live.apply(None)
    assert live.current() == ClusterConfig()
    assert [c.migrations.bandwidth_mib for c in seen] == [8, 16, 0]


def test_the_oldest_cr_is_the_one_in_force() -> None:
    """With two CRs (KubeVirt allows one), the older one rules."""
    old = kv({}, name="a", created="2026-01-01T00:00:00Z")
    new = kv({}, name="b", created="2026-02-01T00:00:00Z")
    found = effective([new, old])
    assert found is not None and found.name == "a"
    assert effective([]) is None


def test_handlers_reread_the_informer_cache() -> None:
    """The informer callbacks apply whatever the cache holds now."""
    cache = [kv({"migrations": {"bandwidthPerMigration": "1Mi"}})]
    live = LiveConfig(ClusterConfig(), list_kvs=lambda: cache)
    handlers = live.handlers()
    assert handlers.on_add is not None and handlers.on_delete is not None
    handlers.on_add(cache[0])
    assert live.current().migrations.bandwidth_mib == 1
    removed = cache.pop()
    handlers.on_delete(removed)
    assert live.current().migrations.bandwidth_mib == 0


@pytest.mark.parametrize(
    ("value", "resolved"),
    [
        pytest.param("shared-storage", "shared-storage", id="set"),
        pytest.param("", None, id="empty"),
        pytest.param(None, None, id="unset"),
    ],
)
def test_vm_state_storage_class_is_read(value: str | None, resolved: str | None) -> None:
    """spec.configuration.vmStateStorageClass names the state claims' class; empty or
    unset leaves none (persistent TPM / EFI then refused at admission)."""
    kv = KubeVirt.from_dict({"spec": {"configuration": {"vmStateStorageClass": value}}})
    assert resolve(ClusterConfig(), kv).vm_state_storage_class == resolved


@pytest.mark.parametrize("value", ["Shared_Storage", "-x", "a" * 254])
def test_a_bad_vm_state_storage_class_is_refused_naming_the_field(value: str) -> None:
    """A value that cannot be a StorageClass name is refused, named."""
    kv = KubeVirt.from_dict({"spec": {"configuration": {"vmStateStorageClass": value}}})
    paths = [e.path for e in validate_kubevirt(kv)]
    assert paths == ["spec.configuration.vmStateStorageClass"]
