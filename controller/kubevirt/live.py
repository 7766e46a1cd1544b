"""The controller's parts of the live configuration: its flags as the ClusterConfig
defaults, and its frozen configs with the KubeVirt CR's values laid over them at the moment
of use (so a CR edit reaches the next sync, with no restart).
"""

from __future__ import annotations

import dataclasses

from controller.config import Config, MigrationConfig, TemplateConfig
from shared.clusterconfig import ClusterConfig, MigrationLimits, RolloutStrategy


def cluster_defaults(config: Config) -> ClusterConfig:
    """What the controller's flags say, before any KubeVirt CR."""
    template, migration = config.template, config.migration
    return ClusterConfig(
        feature_gates=frozenset(config.feature_gates),
        use_emulation=template.use_emulation,
        cpu_allocation_ratio=max(1, round(1000 / template.cpu_request_millis_per_vcpu)),
        migrations=MigrationLimits(
            parallel_per_cluster=migration.parallel_per_cluster,
            outbound_per_node=migration.outbound_per_node,
        ),
        eviction_strategy=migration.eviction_strategy,
        vm_rollout_strategy=RolloutStrategy(config.vm_rollout_strategy),
    )


def migration_config(base: MigrationConfig, cluster: ClusterConfig) -> MigrationConfig:
    """`base` with the cluster's parallel limits and evictionStrategy."""
    return dataclasses.replace(
        base,
        parallel_per_cluster=cluster.migrations.parallel_per_cluster,
        outbound_per_node=cluster.migrations.outbound_per_node,
        eviction_strategy=cluster.eviction_strategy,
    )


def template_config(base: TemplateConfig, cluster: ClusterConfig) -> TemplateConfig:
    """`base` with the cluster's useEmulation, cpuAllocationRatio, memoryOvercommit and
    launcher seccomp profile."""
    return dataclasses.replace(
        base,
        use_emulation=cluster.use_emulation,
        cpu_request_millis_per_vcpu=max(1, round(1000 / cluster.cpu_allocation_ratio)),
        memory_overcommit=cluster.memory_overcommit,
        seccomp_localhost_profile=cluster.seccomp_localhost_profile,
        serial_console_log_disabled=cluster.serial_console_log_disabled,
        vm_state_storage_class=cluster.vm_state_storage_class,
        binding_plugins=cluster.binding_plugins,
    )
