"""The handler daemon: builds its parts and runs them in one TaskGroup.

    notify server ─▶ domain cache ─┐
    launcher pool (connections) ───┼─▶ work queue ─▶ reconcile workers ─▶ launchers, status
    VMI informer (this node) ──────┘
    heartbeat (Node label + annotation)   http (/metrics /healthz /readyz)
    device plugins (kubelet device-plugin API: kvm, tun, vhost-net)
    node labeller (the CPU models and features libvirt offers, as Node labels)

Start: unschedulable first, then the device plugins, the notify server, the launcher
pool, the informer and the HTTP endpoint; workers start once the informer has listed, and
the heartbeat then reports schedulable (when the required devices are usable). Stop
(SIGTERM): report unschedulable, stop taking work, withdraw the device plugins (the
kubelet drops their resources), cancel the rest. Launchers and guests keep running: a
restarted handler reconnects and reconverges.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from functools import partial

import structlog

from handler.actions import ActionsServer, node_publisher
from handler.api import HandlerApi
from handler.backup import BackupTarget
from handler.cgroups import LeftoverPartitions
from handler.config import Config
from handler.deviceplugin import DevicePlugins
from handler.devices import check_devices, devices_ready
from handler.dirmounts import DirMounts
from handler.domains import DomainCache
from handler.downwardmetrics import DownwardMetrics
from handler.expand import EXPAND_DISKS_GATE, DiskExpansion
from handler.heartbeat import Heartbeat
from handler.hotplug import HotplugVolumes
from handler.launcher_target import LauncherTarget
from handler.launchers import (
    LauncherPool,
    LauncherPort,
    LauncherState,
    PoolConfig,
)
from handler.linkrefresh import LinkRefresh
from handler.metrics import VMIStatsCollector
from handler.migration_source import OutgoingMigrations
from handler.migration_target import MigrationTargets
from handler.nodelabeller import NodeLabeller
from handler.notify import NotifyServer
from handler.podnet import PodNetworks
from handler.reconcile import Reconciler
from handler.reconcile_deps import ReconcileOptions, ReconcilerDeps
from handler.seccomp import install_always, installer
from handler.tablegauges import table_gauges
from handler.vsock import NodeCIDs
from shared.clusterconfig import ClusterConfig, LiveConfig, MigrationLimits
from shared.daemon import Shutdown
from shared.kube import (
    VMIS,
    DiscardRecorder,
    EventRecorder,
    Handlers,
    HealthConfig,
    HealthServer,
    Informer,
    InformerConfig,
    KubeError,
    NotFound,
    QueueConfig,
    Registry,
    StatusWriter,
    WorkQueue,
    serving_tls,
)
from shared.kube.syncfailure import FailureTarget, SyncFailures
from shared.labels import NODE_NAME_LABEL
from shared.migrationpolicy import with_policy
from shared.model import (
    Clock,
    KubeVirt,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    utc_now,
)

log = structlog.get_logger("handler")


class Handler:
    """One node's virt-handler; `run(stop)` until `stop` is set."""

    def __init__(
        self,
        config: Config,
        *,
        api: HandlerApi,
        registry: Registry,
        wall: Clock = utc_now,
        recorder: EventRecorder | None = None,
    ) -> None:
        t = config.timing
        self.recorder = recorder
        self.config = config
        self._synced = False
        self._stopping = False
        self.queue = WorkQueue(QueueConfig(name="virt-handler-vmi"), registry=registry)
        self.domains = DomainCache(on_change=self.queue.add)
        self.launchers = LauncherPool(
            PoolConfig(ping_interval=t.ping_interval), on_change=self.queue.add
        )
        self.notify = NotifyServer(config.notify_socket, self.domains)
        self.informer = self._informer(api)
        self.live = self._live_config(api)
        self.outgoing = OutgoingMigrations(config.migration_proxy, limits=self._limits_for)
        self.reconciler = self._reconciler(api, registry, wall)
        self.migrations = self._migration_targets(api, registry, wall)
        self.devices = check_devices(config.devices, required=config.required_devices)
        plugins = config.device_plugins
        self.device_plugins = (
            DevicePlugins(plugins, allocatable=partial(api.node_allocatable, config.node_name))
            if plugins is not None
            else None
        )
        self.heartbeat = Heartbeat(
            api,
            node=config.node_name,
            interval=t.heartbeat_interval,
            jitter=t.heartbeat_jitter,
            schedulable=self.schedulable,
            wall=wall,
        )
        self.labeller = self._labeller(api)
        self.downward_metrics = DownwardMetrics(
            node=config.node_name, pods_dir=config.pods_dir, vmis=self.informer.store.list
        )
        self.stats = VMIStatsCollector(
            registry, node=config.node_name, targets=self._stat_targets, timeout=t.stats_timeout
        )
        self.http = self._http(registry)
        self.actions = self._actions(api)

    def _informer(self, api: HandlerApi) -> Informer[VirtualMachineInstance]:
        """This node's VMIs (the controller labels them at handoff)."""
        informer: Informer[VirtualMachineInstance] = Informer(
            api.vmi_source(label_selector=f"{NODE_NAME_LABEL}={self.config.node_name}"),
            InformerConfig(name="vmi", resync_period=self.config.timing.resync_period),
            decode=VirtualMachineInstance.from_dict,
        )
        informer.add_handlers(Handlers.each(lambda v: self.queue.add(v.key)))
        return informer

    def _limits_for(self, vmi: VirtualMachineInstance) -> MigrationLimits:
        """The KubeVirt CR's migration limits, with the VMI's MigrationPolicy over them."""
        state = vmi.status.migration_state
        policy = state.migration_configuration if state is not None else None
        return with_policy(self.live.current().migrations, policy)

    def _live_config(self, api: HandlerApi) -> LiveConfig:
        """The KubeVirt CR over the flags (the migration proxy's bandwidth), applied live."""
        proxy = self.config.migration_proxy
        bandwidth = proxy.bandwidth_mib if proxy is not None else 0
        self.kubevirt_informer: Informer[KubeVirt] = Informer(
            api.kubevirt_source(self.config.kubevirt_namespace),
            InformerConfig(name="kubevirt", resync_period=self.config.timing.resync_period),
            decode=KubeVirt.from_dict,
        )
        live = LiveConfig(
            # 300 s per GiB until the CR says otherwise: the launcher's former fixed timeout.
            ClusterConfig(
                migrations=MigrationLimits(bandwidth_mib=bandwidth, completion_timeout_per_gib=300)
            ),
            list_kvs=self.kubevirt_informer.store.list,
        )
        self.kubevirt_informer.add_handlers(live.handlers())
        live.on_change(installer(self.config.seccomp_dir))  # KubeVirt's launcher profile
        return live

    def _labeller(self, api: HandlerApi) -> NodeLabeller | None:
        """The node labeller, with the KubeVirt CR's obsoleteCPUModels (relabel on change)."""
        if self.config.node_labeller is None:
            return None
        labeller = NodeLabeller(
            api,
            node=self.config.node_name,
            config=self.config.node_labeller,
            obsolete=lambda: self.live.current().obsolete_cpu_models,
        )
        self.live.on_change(lambda _: labeller.poke())
        return labeller

    def _migration_targets(
        self, api: HandlerApi, registry: Registry, wall: Clock
    ) -> MigrationTargets:
        """The target side of migrations: every VMIM, worked when it names this node."""
        self.vmim_queue = WorkQueue(QueueConfig(name="virt-handler-migration"), registry=registry)
        informer: Informer[VirtualMachineInstanceMigration] = Informer(
            api.vmim_source(),
            InformerConfig(name="vmim", resync_period=self.config.timing.resync_period),
            decode=VirtualMachineInstanceMigration.from_dict,
        )
        # A deleted VMIM's key closes its proxy ports.
        informer.add_handlers(Handlers.each(lambda m: self.vmim_queue.add(m.key)))
        self.vmim_informer = informer
        return MigrationTargets(
            node=self.config.node_name,
            pods_dir=self.config.pods_dir,
            informer=informer,
            queue=self.vmim_queue,
            get_vmi=api.get_vmi,
            writer=StatusWriter(api, VMIS, model=VirtualMachineInstance, registry=registry),
            wall=wall,
            proxy=self.config.migration_proxy,
            podnet=PodNetworks(
                pods_dir=self.config.pods_dir,
                plugins=lambda: self.live.current().binding_plugins,
            ),
        )

    def _reconciler(self, api: HandlerApi, registry: Registry, wall: Clock) -> Reconciler:
        t = self.config.timing
        deps = ReconcilerDeps(
            store=self.informer.store,
            domains=self.domains,
            launchers=self.launchers,
            status=StatusWriter(api, VMIS, model=VirtualMachineInstance, registry=registry),
            get_vmi=api.get_vmi,
            queue=self.queue,
            clock=time.monotonic,
            wall=wall,
            outgoing=self.outgoing,
            recorder=self.recorder or DiscardRecorder(),
            hotplug=HotplugVolumes(pods_dir=self.config.pods_dir),
            podnet=PodNetworks(
                pods_dir=self.config.pods_dir,
                plugins=lambda: self.live.current().binding_plugins,
            ),
            linkrefresh=LinkRefresh(
                node=self.config.node_name, plugins=lambda: self.live.current().binding_plugins
            ),
            expansion=DiskExpansion(enabled=lambda: self.live.current().gate(EXPAND_DISKS_GATE)),
            partitions=LeftoverPartitions(),
            failures=SyncFailures(
                api, FailureTarget(resource=VMIS, store=self.informer.store, owns_condition=False)
            ),
            vsock=NodeCIDs(vmis=self.informer.store.list),
        )
        options = ReconcileOptions(
            node=self.config.node_name,
            pods_dir=self.config.pods_dir,
            acpi_interval=t.acpi_interval,
            launcher_missing_timeout=t.launcher_missing_timeout,
        )
        return Reconciler(deps, options)

    def _http(self, registry: Registry) -> HealthServer:
        registry.gauge(
            "kubevirt_virt_handler_ready_status",
            "1 when virt-handler is ready (caches synced, serving), else 0.",
            ("node",),
        ).labels(self.config.node_name).set_function(lambda: 1.0 if self.ready() else 0.0)
        table_gauges(
            registry,
            self.config.node_name,
            vmis=lambda: len(self.reconciler.uids()),
            domains=lambda: len(self.domains),
            launchers=lambda: len(self.launchers),
        )
        # /metrics asks each launcher for stats first (per-launcher timeouts inside).
        config = HealthConfig(
            host=self.config.listen_host,
            port=self.config.listen_port,
            shutdown_timeout=3.0,
            collect_deadline=self.config.timing.stats_timeout + 1.0,
            tls=serving_tls(self.config.metrics_cert_dir),
        )
        return HealthServer(config, registry, ready=self.ready, collect=self.stats.refresh)

    def _actions(self, api: HandlerApi) -> ActionsServer | None:
        """The actions endpoint the controller's subresource API forwards to (mutual TLS)."""
        config = self.config.actions
        if config is None:
            log.info("actions_endpoint_disabled", why="no certificates mounted")
            return None
        launchers = LauncherTarget(
            self._cached_vmi, node=self.config.node_name, pods_dir=self.config.pods_dir
        )
        target = BackupTarget(
            launchers,
            get_pod=api.get_pod,
            node=self.config.node_name,
            pods_dir=self.config.pods_dir,
            mounts=DirMounts(),
        )
        publish = node_publisher(api.patch_node, self.config.node_name)
        return ActionsServer(config, target, publish=publish)

    async def _cached_vmi(self, namespace: str, name: str) -> VirtualMachineInstance:
        """A VMI of this node from the informer cache (no API read per action)."""
        vmi = self.informer.store.get(f"{namespace}/{name}")
        if vmi is None:
            raise NotFound(404, "NotFound", f"{namespace}/{name} is not on {self.config.node_name}")
        return vmi

    def ready(self) -> bool:
        """Caches synced and the actions endpoint serving (readiness means it serves)."""
        serving = self.actions is None or self.actions.serving
        return self._synced and serving and not self._stopping

    def schedulable(self) -> bool:
        return self.ready() and devices_ready(self.devices)

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until `stop` is set; returns once every task has ended."""
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._stop_on(stop), name="stop-signal")
                install_always(self.config.seccomp_dir)  # passt's profile, before Ready
                await self._beat(schedulable=False)
                if self.device_plugins is not None:
                    tg.create_task(self.device_plugins.run(), name="device-plugins")
                notify_started = asyncio.Event()
                tg.create_task(self.notify.serve(started=notify_started), name="notify-server")
                tg.create_task(self.launchers.run(), name="launcher-pool")
                tg.create_task(self.informer.run(), name="vmi-informer")
                tg.create_task(self.vmim_informer.run(), name="vmim-informer")
                tg.create_task(self.kubevirt_informer.run(), name="kubevirt-informer")
                tg.create_task(self.http.run(), name="http")
                if self.labeller is not None:
                    tg.create_task(self.labeller.run(), name="node-labeller")
                tg.create_task(self.downward_metrics.run(), name="downward-metrics")
                if self.recorder is not None:
                    tg.create_task(self.recorder.run(), name="event-recorder")
                if self.actions is not None:
                    tg.create_task(self.actions.run(), name="actions")
                await notify_started.wait()
                await self.launchers.started.wait()
                await self.informer.has_synced.wait()
                tg.create_task(
                    self.queue.run_workers(self.config.workers, self.reconciler.process),
                    name="vmi-workers",
                )
                await self.vmim_informer.has_synced.wait()
                tg.create_task(
                    self.vmim_queue.run_workers(2, self.migrations.process),
                    name="migration-workers",
                )
                self._synced = True
                log.info("handler_ready", vmis=len(self.informer.store))
                tg.create_task(self.heartbeat.run(), name="heartbeat")
                if self.actions is not None:
                    tg.create_task(self._poke_when_serving(self.actions), name="serving-poke")
        except* Shutdown:
            log.info("handler_stopped")

    async def _poke_when_serving(self, actions: ActionsServer) -> None:
        """Readiness waits on the actions endpoint's publication (it may come after the
        caches synced): the heartbeat publishes schedulable=true then, not a beat later."""
        await actions.published.wait()  # set after it listens
        self.heartbeat.poke()

    async def _stop_on(self, stop: asyncio.Event) -> None:
        await stop.wait()
        log.info("handler_stopping")
        self._stopping = True
        self.queue.shut_down()
        self.vmim_queue.shut_down()
        try:
            async with asyncio.timeout(self.config.timing.shutdown_budget):
                await self._beat(schedulable=False)
        except TimeoutError:
            log.warning("heartbeat_on_shutdown_timed_out")
        if self.device_plugins is not None:
            await self.device_plugins.shutdown(self.config.timing.shutdown_budget)
        raise Shutdown

    async def _beat(self, *, schedulable: bool) -> None:
        try:
            await self.heartbeat.beat(schedulable=schedulable)
        except KubeError as exc:
            log.warning("heartbeat_failed", error=str(exc))

    def _stat_targets(self) -> Iterator[tuple[str, LauncherPort | None]]:
        for key, uid in self.reconciler.uids().items():
            launcher = self.launchers.get(uid)
            connected = launcher is not None and launcher.state is LauncherState.CONNECTED
            yield key, launcher if connected else None
