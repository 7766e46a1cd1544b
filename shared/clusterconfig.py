"""The cluster's live configuration: the daemons' flags as defaults, the KubeVirt CR on top.

    live = LiveConfig(defaults)              # from the daemon's flags
    informer.add_handlers(live.handlers())   # kubevirt.io/v1 KubeVirt in the daemon's namespace
    live.current().migrations.bandwidth_mib  # read at the moment of use, never cached

Every field the CR leaves unset keeps the flag's value. A CR that does not validate leaves
the last good configuration in place and is kept as `error` (the controller reports it as
the CR's Degraded condition); it never takes a daemon down. Admission refuses such a CR
first (virt_api.admission), naming the field.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import structlog

from shared import mignet, netbinding
from shared.cpulabels import DEFAULT_OBSOLETE_MODELS
from shared.kube.informer import Handlers
from shared.model import EvictionStrategy, FieldError, InvalidObject, QuantityError
from shared.model._validate_common import DNS1123_SUBDOMAIN
from shared.model.kubevirt import KubeVirt, KubeVirtConfiguration
from shared.model.migrationconfig import MigrationConfiguration
from shared.model.quantity import MI, parse_bytes
from shared.seccompconfig import localhost_profile

log = structlog.get_logger("shared.clusterconfig")
E = TypeVar("E", EvictionStrategy, "RolloutStrategy")

# KubeVirt's feature gate that lets a VMI name hook sidecars (hooks.kubevirt.io/hookSidecars).
SIDECAR_GATE = "Sidecar"
# KubeVirt 1.7's gate for VMIM sendTo / receive and runStrategy WaitAsReceiver.
DECENTRALIZED_MIGRATION_GATE = "DecentralizedLiveMigration"
MAX_NAME = 253  # a StorageClass name: a DNS-1123 subdomain


class RolloutStrategy(enum.StrEnum):
    """spec.configuration.vmRolloutStrategy (KubeVirt's default since v1.5: LiveUpdate)."""

    LIVE_UPDATE = "LiveUpdate"
    STAGE = "Stage"


class InvalidKubeVirt(InvalidObject):
    """A KubeVirt CR failed validation."""

    kind = "KubeVirt"


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationLimits:
    """spec.configuration.migrations, with KubeVirt's defaults."""

    parallel_per_cluster: int = 5
    outbound_per_node: int = 2
    bandwidth_mib: int = 0  # per migration, MiB/s; 0: unlimited
    completion_timeout_per_gib: int = 150
    progress_timeout: int = 150
    allow_auto_converge: bool = False
    allow_post_copy: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterConfig:
    """What every daemon reads of the cluster's configuration."""

    feature_gates: frozenset[str] = frozenset()
    use_emulation: bool = True
    cpu_allocation_ratio: int = 10
    memory_overcommit: int = 100  # percent: the pod requests guest memory * 100 / this
    migrations: MigrationLimits = field(default_factory=MigrationLimits)
    eviction_strategy: EvictionStrategy = EvictionStrategy.NONE
    vm_rollout_strategy: RolloutStrategy = RolloutStrategy.LIVE_UPDATE
    max_cpu_sockets: int | None = None  # None: KubeVirt's maxHotplugRatio x the VM's sockets
    max_hotplug_ratio: int = 4
    # spec.workloadUpdateStrategy: "LiveMigrate" in the methods lets the workload updater
    # migrate VMIs off outdated launchers, batch_eviction_size at a time.
    workload_update_methods: frozenset[str] = frozenset()
    batch_eviction_size: int = 10
    # seccompConfiguration's Localhost profile for launcher pods (None: RuntimeDefault).
    seccomp_localhost_profile: str | None = None
    # virtualMachineOptions.disableSerialConsoleLog: the guest-console-log container is off
    # unless a VMI asks (logSerialConsole). KubeVirt's default configuration sets it; a CR
    # with virtualMachineOptions but without it turns the log on for every VMI.
    serial_console_log_disabled: bool = True
    # obsoleteCPUModels: models the node labeller leaves unlabelled (KubeVirt's default set).
    obsolete_cpu_models: frozenset[str] = DEFAULT_OBSOLETE_MODELS
    # vmStateStorageClass: the class of persistent-state claims (None: persistent TPM / EFI
    # refused at admission).
    vm_state_storage_class: str | None = None
    # migrations.network: the NetworkAttachmentDefinition of the migration network (None: the
    # pod network carries migrations; shared/mignet.py).
    migration_network: str | None = None
    # network.binding: the registered network binding plugins (shared/netbinding.py).
    binding_plugins: tuple[netbinding.BindingPlugin, ...] = ()

    def gate(self, name: str) -> bool:
        """Whether feature gate `name` is on."""
        return name in self.feature_gates


def _positive(errors: list[FieldError], path: str, value: int | None, *, zero: bool) -> None:
    if value is not None and (value < 0 or (value == 0 and not zero)):
        bound = "must not be negative" if zero else "must be positive"
        errors.append(FieldError(path=path, message=bound, value=value))


def _bandwidth(errors: list[FieldError], m: MigrationConfiguration, base: str) -> int | None:
    if m.bandwidth_per_migration is None:
        return None
    path = f"{base}.bandwidthPerMigration"
    try:
        value = parse_bytes(m.bandwidth_per_migration)
    except QuantityError as e:
        errors.append(FieldError(path=path, message=e.message, value=m.bandwidth_per_migration))
        return None
    if value < 0:
        errors.append(FieldError(path=path, message="must not be negative", value=value))
        return None
    return -(-value // MI)  # libvirt's unit is MiB/s; round up so 1Ki still limits


def resolve_migrations(
    limits: MigrationLimits, m: MigrationConfiguration, *, base: str
) -> MigrationLimits:
    """`limits` with what `m` sets; InvalidKubeVirt naming each bad field under `base`."""
    errors: list[FieldError] = []
    out = _migration_limits(limits, m, errors, path=base)
    if errors:
        raise InvalidKubeVirt(errors)
    return out


def _migration_limits(
    base: MigrationLimits,
    m: MigrationConfiguration | None,
    errors: list[FieldError],
    *,
    path: str = "spec.configuration.migrations",
) -> MigrationLimits:
    if m is None:
        return base
    _positive(
        errors,
        f"{path}.parallelMigrationsPerCluster",
        m.parallel_migrations_per_cluster,
        zero=False,
    )
    _positive(
        errors,
        f"{path}.parallelOutboundMigrationsPerNode",
        m.parallel_outbound_migrations_per_node,
        zero=False,
    )
    _positive(errors, f"{path}.completionTimeoutPerGiB", m.completion_timeout_per_gi_b, zero=False)
    _positive(errors, f"{path}.progressTimeout", m.progress_timeout, zero=False)
    bandwidth = _bandwidth(errors, m, path)

    def pick(value: int | bool | None, default: int | bool) -> int | bool:
        return default if value is None else value

    return MigrationLimits(
        parallel_per_cluster=int(
            pick(m.parallel_migrations_per_cluster, base.parallel_per_cluster)
        ),
        outbound_per_node=int(
            pick(m.parallel_outbound_migrations_per_node, base.outbound_per_node)
        ),
        bandwidth_mib=base.bandwidth_mib if bandwidth is None else bandwidth,
        completion_timeout_per_gib=int(
            pick(m.completion_timeout_per_gi_b, base.completion_timeout_per_gib)
        ),
        progress_timeout=int(pick(m.progress_timeout, base.progress_timeout)),
        allow_auto_converge=bool(pick(m.allow_auto_converge, base.allow_auto_converge)),
        allow_post_copy=bool(pick(m.allow_post_copy, base.allow_post_copy)),
    )


def _enum(errors: list[FieldError], path: str, cls: type[E], value: str | None, default: E) -> E:
    if value is None:
        return default
    try:
        return cls(value)
    except ValueError:
        known = ", ".join(str(v) for v in cls)
        errors.append(FieldError(path=path, message=f"must be one of {known}", value=value))
        return default


def _state_class(c: KubeVirtConfiguration, errors: list[FieldError]) -> str | None:
    """vmStateStorageClass as set ("" when set empty), None when unset or not a name."""
    value = c.vm_state_storage_class
    if value and (len(value) > MAX_NAME or not DNS1123_SUBDOMAIN.fullmatch(value)):
        path = "spec.configuration.vmStateStorageClass"
        errors.append(FieldError(path=path, message="must be a storage class name", value=value))
        return None
    return value


def _configuration(
    defaults: ClusterConfig, c: KubeVirtConfiguration, errors: list[FieldError]
) -> ClusterConfig:
    dev = c.developer_configuration
    base = "spec.configuration"
    changes: dict[str, object] = {}
    if dev is not None:
        path = f"{base}.developerConfiguration"
        _positive(errors, f"{path}.cpuAllocationRatio", dev.cpu_allocation_ratio, zero=False)
        _positive(errors, f"{path}.memoryOvercommit", dev.memory_overcommit, zero=False)
        if dev.memory_overcommit is not None and 0 < dev.memory_overcommit < 10:
            msg = "must be at least 10 (percent)"
            errors.append(FieldError(path=f"{path}.memoryOvercommit", message=msg))
        if "featureGates" in dev.to_dict():
            changes["feature_gates"] = frozenset(dev.feature_gates)
        for name, value in (
            ("use_emulation", dev.use_emulation),
            ("cpu_allocation_ratio", dev.cpu_allocation_ratio),
            ("memory_overcommit", dev.memory_overcommit),
        ):
            if value is not None:
                changes[name] = value
    live = c.live_update_configuration
    if live is not None:
        path = f"{base}.liveUpdateConfiguration"
        _positive(errors, f"{path}.maxCpuSockets", live.max_cpu_sockets, zero=False)
        _positive(errors, f"{path}.maxHotplugRatio", live.max_hotplug_ratio, zero=False)
        if live.max_cpu_sockets is not None:
            changes["max_cpu_sockets"] = live.max_cpu_sockets
        if live.max_hotplug_ratio is not None:
            changes["max_hotplug_ratio"] = live.max_hotplug_ratio
    changes["migrations"] = _migration_limits(defaults.migrations, c.migrations, errors)
    network = c.migrations.network if c.migrations is not None else None
    changes["migration_network"] = mignet.check_network(errors, network or "")
    changes["binding_plugins"] = netbinding.resolve_plugins(c.network, errors)
    if (options := c.virtual_machine_options) is not None:
        changes["serial_console_log_disabled"] = options.disable_serial_console_log is not None
    if "obsoleteCPUModels" in c.to_dict():  # set, even empty: it replaces the default
        obsolete = frozenset(m for m, on in c.obsolete_cpu_models.items() if on)
        changes["obsolete_cpu_models"] = obsolete
    if (state_class := _state_class(c, errors)) is not None:
        changes["vm_state_storage_class"] = state_class or None
    if (profile := localhost_profile(c, errors)) is not None:
        changes["seccomp_localhost_profile"] = profile
    changes["eviction_strategy"] = _enum(
        errors,
        f"{base}.evictionStrategy",
        EvictionStrategy,
        c.eviction_strategy,
        defaults.eviction_strategy,
    )
    changes["vm_rollout_strategy"] = _enum(
        errors,
        f"{base}.vmRolloutStrategy",
        RolloutStrategy,
        c.vm_rollout_strategy,
        defaults.vm_rollout_strategy,
    )
    return dataclasses.replace(defaults, **changes)  # type: ignore[arg-type]


def _workload(config: ClusterConfig, kv: KubeVirt, errors: list[FieldError]) -> ClusterConfig:
    strategy = kv.spec.workload_update_strategy
    if strategy is None:
        return config
    path = "spec.workloadUpdateStrategy"
    for i, method in enumerate(strategy.workload_update_methods):
        if method not in ("LiveMigrate", "Evict"):
            message = "must be LiveMigrate or Evict"
            errors.append(FieldError(path=f"{path}.workloadUpdateMethods[{i}]", message=message))
    _positive(errors, f"{path}.batchEvictionSize", strategy.batch_eviction_size, zero=False)
    return dataclasses.replace(
        config,
        workload_update_methods=frozenset(strategy.workload_update_methods),
        batch_eviction_size=strategy.batch_eviction_size or config.batch_eviction_size,
    )


def resolve(defaults: ClusterConfig, kv: KubeVirt | None) -> ClusterConfig:
    """`defaults` with every field `kv` sets; InvalidKubeVirt naming each bad field."""
    if kv is None:
        return defaults
    errors: list[FieldError] = []
    config = defaults
    if kv.spec.configuration is not None:
        config = _configuration(defaults, kv.spec.configuration, errors)
    config = _workload(config, kv, errors)
    if errors:
        raise InvalidKubeVirt(errors, name=kv.name)
    return config


def validate_kubevirt(kv: KubeVirt) -> list[FieldError]:
    """Every problem of a KubeVirt CR's configuration (admission's rules)."""
    try:
        resolve(ClusterConfig(), kv)
    except InvalidKubeVirt as e:
        return list(e.errors)
    return []


def effective(kvs: Sequence[KubeVirt]) -> KubeVirt | None:
    """The cluster's one KubeVirt: the oldest live one (KubeVirt allows a single CR)."""
    live = [kv for kv in kvs if not kv.metadata.is_deleting]
    live.sort(key=lambda kv: (kv.metadata.creation_timestamp or "", kv.name))
    return live[0] if live else None


class LiveConfig:
    """The configuration in force: flag defaults, then the last KubeVirt CR that validated."""

    def __init__(
        self, defaults: ClusterConfig, *, list_kvs: Callable[[], Sequence[KubeVirt]] | None = None
    ) -> None:
        self.defaults = defaults
        self._current = defaults
        self._list = list_kvs
        self.error: InvalidKubeVirt | None = None
        self.generation: int | None = None  # metadata.generation of the CR in force
        self._listeners: list[Callable[[ClusterConfig], None]] = []

    def current(self) -> ClusterConfig:
        """The configuration to use now."""
        return self._current

    def on_change(self, listener: Callable[[ClusterConfig], None]) -> None:
        """Call `listener` with each new configuration (must not block)."""
        self._listeners.append(listener)

    def apply(self, kv: KubeVirt | None) -> None:
        """Take `kv` (None: back to the defaults) unless it does not validate."""
        try:
            config = resolve(self.defaults, kv)
        except InvalidKubeVirt as e:
            if str(e) != str(self.error):
                log.warning("kubevirt_config_invalid", error=str(e))
            self.error = e
            return
        self.error = None
        self.generation = kv.metadata.generation if kv is not None else None
        if config != self._current:
            self._current = config
            log.info("kubevirt_config_applied", name=kv.name if kv else None)
            for listener in self._listeners:
                listener(config)

    def refresh(self) -> None:
        """Re-read the informer's cache."""
        if self._list is not None:
            self.apply(effective(self._list()))

    def handlers(self) -> Handlers[KubeVirt]:
        """Informer callbacks that re-read the cache on any change."""
        return Handlers(
            on_add=lambda _: self.refresh(),
            on_update=lambda _old, _new: self.refresh(),
            on_delete=lambda _: self.refresh(),
        )
