"""The controller's configuration: parsed once from the command line (and environment) into
frozen dataclasses that are passed to every part that needs them; nothing reads the
environment anywhere else.

Every flag can also come from an environment variable named after it:
`--launcher-image` ← `VIRT_CONTROLLER_LAUNCHER_IMAGE`. The command line wins.
"""

from __future__ import annotations

import argparse
import enum
import os
import shlex
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from controller.errors import ConfigError
from controller.migration.sync_config import SyncConfig
from controller.services.overhead import OverheadConfig
from shared.model import EvictionStrategy
from shared.netbinding import BindingPlugin

ENV_PREFIX = "VIRT_CONTROLLER_"
DEFAULT_LAUNCHER_IMAGE = "registry.local/kubevirt-py/virt-launcher:dev"
# Host directory holding one handler notify socket per node: <dir>/<node>/domain-notify.sock
# (mounted at the same path in launcher pods; the handler's default too).
DEFAULT_NOTIFY_HOST_DIR = "/var/run/kubevirt-py/nodes"


class ContainerDiskDelivery(enum.StrEnum):
    """How containerDisk and kernelBoot images reach the launcher (docs/containerdisk.md)."""

    IMAGE_VOLUME = "ImageVolume"  # Kubernetes image volumes: mounted read-only, no copy
    COPY = "Copy"  # init containers copy the files (runtimes without image volumes)


@dataclass(frozen=True, slots=True, kw_only=True)
class TemplateConfig:
    """What the launcher pod template needs beyond the VMI itself."""

    launcher_image: str = DEFAULT_LAUNCHER_IMAGE
    image_pull_policy: str = "IfNotPresent"
    # Empty: the image's entrypoint runs the launcher and gets only args.
    launcher_command: tuple[str, ...] = ()
    # KubeVirt's useEmulation: guests may run under TCG, so no /dev/kvm is requested.
    use_emulation: bool = True
    notify_host_dir: str = DEFAULT_NOTIFY_HOST_DIR
    kvm_probe_file: str | None = None
    # A node directory of QEMU capability caches the launchers share (local clusters): a
    # launcher's libvirtd then skips probing QEMU (~1 s of CPU per start here).
    capabilities_seed: str | None = None
    # The node's cache made by virt-handler's `qemu-capabilities` init container, mounted
    # read-only into launcher pods (real nodes; podlayout.QEMU_CAPABILITIES_SEED_DIR).
    node_capabilities_seed: bool = False
    log_format: str = "json"
    container_disk_delivery: ContainerDiskDelivery = ContainerDiskDelivery.IMAGE_VOLUME
    # CPU request per vCPU when the VMI sets none (KubeVirt's cpuAllocationRatio of 10).
    cpu_request_millis_per_vcpu: int = 100
    # KubeVirt's memoryOvercommit (percent): the guest's memory request is guest * 100 / it.
    memory_overcommit: int = 100
    overhead: OverheadConfig = field(default_factory=OverheadConfig)
    # KubeVirt's default: the compute container runs as the qemu user (107), libvirt in
    # session mode (docs/nonroot.md). True: as root, libvirtd in system mode (the switch).
    launcher_as_root: bool = False
    # The KubeVirt CR's seccompConfiguration: a Localhost profile for launcher pods (None:
    # RuntimeDefault; shared/seccompconfig.py).
    seccomp_localhost_profile: str | None = None
    # The KubeVirt CR's virtualMachineOptions.disableSerialConsoleLog (shared/clusterconfig).
    serial_console_log_disabled: bool = True
    # The KubeVirt CR's vmStateStorageClass: the class of VM state claims (shared/vmstate.py).
    vm_state_storage_class: str | None = None
    # The KubeVirt CR's network.binding plugins: their NADs and overheads (shared/netbinding).
    binding_plugins: tuple[BindingPlugin, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationConfig:
    """KubeVirt's migration defaults: 5 in flight per cluster, 2 outbound per node."""

    parallel_per_cluster: int = 5
    outbound_per_node: int = 2
    unschedulable_timeout: float = 300.0
    # A migration handed to the handlers that is cancelled but never settles is let go.
    abort_timeout: float = 300.0
    # The cluster-wide evictionStrategy for VMIs that set none (KubeVirt's KubeVirt CR
    # spec.configuration.evictionStrategy; unset there means None).
    eviction_strategy: EvictionStrategy = EvictionStrategy.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class TimingConfig:
    """Timeouts of the VMI, VM and node controllers."""

    # A launcher pod the scheduler cannot place for this long fails its VMI.
    vmi_unschedulable_timeout: float = 300.0
    # A handler heartbeat older than this marks its node dead.
    heartbeat_timeout: float = 300.0
    # Crash-loop backoff of VMs: base * 2**(failures-1), capped.
    start_backoff_base: float = 10.0
    start_backoff_max: float = 300.0
    # How long a sync may wait on one API call.
    request_timeout: float = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderConfig:
    """The coordination.k8s.io Lease two replicas compete for (client-go's timings)."""

    namespace: str = "kubevirt"
    name: str = "virt-controller-py"
    identity: str = ""
    lease_seconds: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerCounts:
    """Workers per queue: KubeVirt runs 10 for VMIs and 3 for most others."""

    vmi: int = 10
    vm: int = 3
    migration: int = 3
    node: int = 3
    budget: int = 3
    evacuation: int = 3
    replicaset: int = 3
    pool: int = 3
    datavolume: int = 3
    export: int = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    """Everything `python -m controller` needs."""

    kubeconfig: Path | None = None
    log_format: str = "json"
    health_host: str = "0.0.0.0"  # probes and scrapes come from outside the pod
    health_port: int = 8443
    metrics_cert_dir: Path | None = None  # HTTPS for /metrics /healthz /readyz
    qps: float = 200.0
    burst: int = 400
    resync_period: float = 0.0
    # Watch one namespace only ("" = all): tests run one controller per namespace.
    namespace: str = ""
    template: TemplateConfig = field(default_factory=TemplateConfig)
    migration: MigrationConfig = field(default_factory=MigrationConfig)
    timing: TimingConfig = field(default_factory=TimingConfig)
    leader: LeaderConfig = field(default_factory=LeaderConfig)
    workers: WorkerCounts = field(default_factory=WorkerCounts)
    # Defaults of the cluster configuration the KubeVirt CR overrides live
    # (controller/kubevirt/live.py): feature gates, rollout strategy, and where the CR is.
    feature_gates: tuple[str, ...] = ()
    vm_rollout_strategy: str = "LiveUpdate"
    kubevirt_namespace: str = "kubevirt"
    # The synchronization endpoint of decentralized migration (controller/migration/).
    sync: SyncConfig = field(default_factory=SyncConfig)

    @classmethod
    def from_args(
        cls, argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
    ) -> Self:
        """Parse the command line; defaults come from VIRT_CONTROLLER_* variables."""
        env = dict(os.environ if environ is None else environ)
        ns = _parser(env).parse_args(argv)
        try:
            return cls._from_namespace(ns)
        except ValueError as e:
            raise ConfigError(str(e)) from e

    @classmethod
    def _from_namespace(cls, ns: argparse.Namespace) -> Self:
        template = _template(ns)
        migration = MigrationConfig(
            parallel_per_cluster=int(ns.parallel_migrations),
            outbound_per_node=int(ns.parallel_outbound_migrations_per_node),
            unschedulable_timeout=float(ns.migration_unschedulable_timeout),
            abort_timeout=float(ns.migration_abort_timeout),
            eviction_strategy=_eviction_strategy(ns.eviction_strategy),
        )
        timing = TimingConfig(
            vmi_unschedulable_timeout=float(ns.unschedulable_timeout),
            heartbeat_timeout=float(ns.heartbeat_timeout),
            start_backoff_base=float(ns.start_backoff_base),
            start_backoff_max=float(ns.start_backoff_max),
        )
        leader = LeaderConfig(
            namespace=ns.leader_namespace,
            name=ns.leader_name,
            identity=ns.identity or f"{socket.gethostname()}-{os.getpid()}",
            lease_seconds=float(ns.lease_seconds),
        )
        workers = WorkerCounts(vmi=int(ns.vmi_workers), vm=int(ns.vm_workers), migration=3, node=3)
        return cls(
            kubeconfig=Path(ns.kubeconfig) if ns.kubeconfig else None,
            log_format=ns.log_format,
            health_host=ns.health_host,
            health_port=int(ns.port),
            metrics_cert_dir=Path(ns.metrics_cert_dir) if ns.metrics_cert_dir else None,
            qps=float(ns.qps),
            burst=int(ns.burst),
            resync_period=float(ns.resync_period),
            namespace=ns.namespace,
            template=template,
            migration=migration,
            timing=timing,
            leader=leader,
            workers=workers,
            feature_gates=tuple(g.strip() for g in ns.feature_gates.split(",") if g.strip()),
            vm_rollout_strategy=_rollout(ns.vm_rollout_strategy),
            kubevirt_namespace=ns.kubevirt_namespace,
            sync=SyncConfig.from_flags(
                cert_dir=ns.sync_cert_dir, port=ns.sync_port, advertise_host=ns.sync_advertise_host
            ),
        )


def _template(ns: argparse.Namespace) -> TemplateConfig:
    """How launcher pods are rendered."""
    return TemplateConfig(
        launcher_image=ns.launcher_image,
        image_pull_policy=ns.image_pull_policy,
        launcher_command=tuple(shlex.split(ns.launcher_command)),
        use_emulation=_flag(ns.use_emulation),
        notify_host_dir=ns.notify_host_dir,
        kvm_probe_file=ns.kvm_probe_file or None,
        capabilities_seed=ns.capabilities_seed or None,
        node_capabilities_seed=_flag(ns.node_capabilities_seed),
        log_format=ns.launcher_log_format,
        container_disk_delivery=_delivery(ns.container_disk_delivery),
        cpu_request_millis_per_vcpu=_millis_per_vcpu(ns.cpu_allocation_ratio),
        launcher_as_root=_flag(ns.launcher_as_root),
    )


def _flag(value: Any) -> bool:
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


# (flag, default, help); the environment variable is VIRT_CONTROLLER_<FLAG>.
_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("kubeconfig", "", "kubeconfig path; empty: in-cluster service account"),
    ("log-format", "json", "json or console"),
    ("health-host", "0.0.0.0", "address of /healthz, /readyz and /metrics (e.g. the pod IP)"),
    ("port", "8443", "port of /healthz, /readyz and /metrics"),
    ("metrics-cert-dir", "", "tls.crt + tls.key: serve /healthz, /readyz, /metrics over HTTPS"),
    ("qps", "200", "API client rate limit (KubeVirt's controller: 200)"),
    ("burst", "400", "API client burst"),
    ("resync-period", "0", "seconds between informer resyncs; 0 disables"),
    ("namespace", "", "watch only this namespace (blank: all)"),
    ("launcher-image", DEFAULT_LAUNCHER_IMAGE, "image of launcher pods"),
    ("image-pull-policy", "IfNotPresent", "pull policy of launcher pods"),
    ("launcher-command", "", "command of the launcher container (blank: image entrypoint)"),
    ("use-emulation", "true", "let guests run under TCG: no /dev/kvm request"),
    ("notify-host-dir", DEFAULT_NOTIFY_HOST_DIR, "host dir of <node>/domain-notify.sock"),
    ("kvm-probe-file", "", "launcher --kvm-probe-file"),
    ("capabilities-seed", "", "launcher --capabilities-seed (a shared node dir; local clusters)"),
    (
        "node-capabilities-seed",
        "false",
        "mount the node's QEMU capability cache (virt-handler's init container makes it) "
        "read-only into launcher pods",
    ),
    ("launcher-log-format", "json", "launcher --log-format"),
    (
        "launcher-as-root",
        "false",
        "run launchers' compute container as root (libvirtd in system mode) instead of "
        "the non-root qemu user 107 (docs/nonroot.md)",
    ),
    (
        "container-disk-delivery",
        ContainerDiskDelivery.IMAGE_VOLUME.value,
        "how containerDisk/kernelBoot images reach launchers: ImageVolume (mounted, "
        "Kubernetes image volumes) or Copy (init containers; runtimes without image volumes)",
    ),
    ("cpu-allocation-ratio", "10", "vCPUs per requested CPU when a VMI sets no CPU request"),
    ("parallel-migrations", "5", "migrations in flight per cluster"),
    ("parallel-outbound-migrations-per-node", "2", "outbound migrations per node"),
    ("migration-unschedulable-timeout", "300", "seconds a target pod may stay unschedulable"),
    ("migration-abort-timeout", "300", "seconds a cancelled migration waits for the handlers"),
    (
        "eviction-strategy",
        "None",
        "cluster-wide evictionStrategy of VMIs that set none: "
        "None, LiveMigrate, LiveMigrateIfPossible or External",
    ),
    ("feature-gates", "", "KubeVirt feature gates on, comma-separated (the KubeVirt CR wins)"),
    ("vm-rollout-strategy", "LiveUpdate", "LiveUpdate or Stage (the KubeVirt CR wins)"),
    ("kubevirt-namespace", "kubevirt", "namespace of the KubeVirt CR read live"),
    ("unschedulable-timeout", "300", "seconds a launcher pod may stay unschedulable"),
    ("heartbeat-timeout", "300", "seconds before a handler heartbeat is stale"),
    ("start-backoff-base", "10", "crash-loop backoff of VMs: first delay in seconds"),
    ("start-backoff-max", "300", "crash-loop backoff of VMs: longest delay in seconds"),
    ("leader-namespace", "kubevirt", "namespace of the leader Lease"),
    ("leader-name", "virt-controller-py", "name of the leader Lease"),
    ("identity", "", "leader identity (default hostname-pid)"),
    ("lease-seconds", "15", "leader lease duration"),
    (
        "sync-cert-dir",
        "",
        "tls.crt + tls.key + ca.crt: serve and dial decentralized "
        "migration's synchronization endpoint (blank or incomplete: one cluster only)",
    ),
    ("sync-port", "9185", "port of the synchronization endpoint (the leader listens)"),
    (
        "sync-advertise-host",
        "",
        "the address other clusters dial (the pod IP): the KubeVirt "
        "CR's and receiving VMIMs' status.synchronizationAddresses",
    ),
    ("vmi-workers", "10", "VMI controller workers"),
    ("vm-workers", "3", "VM controller workers"),
)


def _delivery(value: str) -> ContainerDiskDelivery:
    try:
        return ContainerDiskDelivery(value)
    except ValueError:
        known = ", ".join(d.value for d in ContainerDiskDelivery)
        raise ValueError(
            f"--container-disk-delivery must be one of {known}, not {value!r}"
        ) from None


def _eviction_strategy(value: str) -> EvictionStrategy:
    try:
        return EvictionStrategy(value or "None")
    except ValueError:
        known = ", ".join(s.value for s in EvictionStrategy)
        raise ValueError(f"--eviction-strategy must be one of {known}, not {value!r}") from None


def _rollout(value: str) -> str:
    if value not in ("LiveUpdate", "Stage"):
        raise ValueError(f"--vm-rollout-strategy must be LiveUpdate or Stage, not {value!r}")
    return value


def _millis_per_vcpu(ratio: str) -> int:
    """KubeVirt's cpuAllocationRatio: a vCPU requests 1/ratio of a CPU (at least 1m)."""
    value = float(ratio)
    if value <= 0:
        raise ValueError(f"--cpu-allocation-ratio must be positive, not {ratio}")
    return max(1, round(1000 / value))


def _parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="virt-controller-py", description="kubevirt-py controller")
    for flag, default, help_text in _FLAGS:
        var = ENV_PREFIX + flag.upper().replace("-", "_")
        p.add_argument(f"--{flag}", default=env.get(var, default), help=f"{help_text} (${var})")
    return p
