"""The controller's object graph and its one TaskGroup.

    informers (always, so a standby has warm caches)  ┐
    /healthz /readyz /metrics                          ├─ one TaskGroup
    leader election → while leading: the work queues' workers ┘
                      and the synchronization endpoint (:9185, decentralized migration)

A standby keeps its caches synced (virt-api's admission and subresources and the live
KubeVirt configuration read them; the event handlers' side tables, bounded by the caches,
stay fed) but fills no work queue: every queue is gated by `leading`, so a standby holds no key,
no delayed requeue and no backoff, whatever churns while it stands by. On election
`open_queues` sets `leading` and re-delivers every cached object to the handlers
(`Informer.resync`: an update with old is new), so each loop queues what it would for a
change and nothing that changed while standing by is missed; then its workers start. An
object deleted while standing by is not queued: no loop's sync of a gone key acts beyond
its own tables, except what the resync reaches through an object still cached (a gone
VMI's PodDisruptionBudget through the budget informer, a held VM of a gone pool through
the VM informer). Losing the Lease ends the daemon (LeadershipLost, exit 1), as KubeVirt's
does: the Deployment restarts it as a standby, so the queues never close again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from controller import metrics_fleet
from controller.config import Config
from controller.deps import Deps
from controller.informers import Informers, SourceWrapper, build_informers
from controller.kubevirt.live import cluster_defaults
from controller.loops import Loops, build_loops
from controller.metrics import ObjectMetrics
from controller.migration.sync_server import SyncServer
from controller.recent import Recent
from shared.clusterconfig import LiveConfig
from shared.kube import (
    VMIS,
    EventRecorder,
    Handlers,
    HealthConfig,
    HealthServer,
    KubeClient,
    LeaderConfig,
    LeaderElector,
    RecorderConfig,
    Registry,
    StatusWriter,
    serving_tls,
    wait_for_sync,
)
from shared.model import (
    Clock,
    KubeObject,
    VirtualMachineInstance,
    utc_now,
)

log = structlog.get_logger("controller")

SYNC_TIMEOUT = 300.0


class Controller:
    """virt-controller-py: informers, controllers, leader election and the health endpoint."""

    def __init__(
        self,
        config: Config,
        client: KubeClient,
        registry: Registry,
        *,
        wrap: SourceWrapper | None = None,
        clock: Clock = utc_now,
    ) -> None:
        self.config = config
        self.registry = registry
        # Set once elected (open_queues); every loop's queue ignores keys until then.
        self.leading = asyncio.Event()
        vmi_recent: Recent[VirtualMachineInstance] = Recent()
        self.informers: Informers = build_informers(
            client,
            namespace=config.namespace,
            resync_period=config.resync_period,
            wrap=wrap,
            vmi_writes=vmi_recent,
            kubevirt_namespace=config.kubevirt_namespace,
        )
        # The KubeVirt CR over the flags, applied live (controller/kubevirt/).
        self.live = LiveConfig(cluster_defaults(config))
        self.recorder = EventRecorder(
            client, RecorderConfig(component="virt-controller"), registry=registry
        )
        deps = Deps(
            client=client,
            informers=self.informers,
            clock=clock,
            vmi_recent=vmi_recent,
            vmi_writer=StatusWriter(client, VMIS, model=VirtualMachineInstance, registry=registry),
            recorder=self.recorder,
            leading=self.leading,
        )
        self.loops: Loops = build_loops(config, deps, registry, self.live)
        self.loops.register(self.informers)
        self._forget_events_of_deleted()
        self.elector = LeaderElector(client, _leader_config(config))
        self.health = HealthServer(
            HealthConfig(
                host=config.health_host,
                port=config.health_port,
                tls=serving_tls(config.metrics_cert_dir),
            ),
            registry,
            ready=self.ready,
        )
        self._export_metrics(registry)

    def _forget_events_of_deleted(self) -> None:
        """A deleted object's event bookkeeping (spam buckets, aggregation) goes with it
        (events are only recorded about KubeObjects; the informers' views are not ones)."""

        def forget(obj: object) -> None:
            if isinstance(obj, KubeObject):
                self.recorder.forget(obj.uid)

        handlers: Handlers[Any] = Handlers(on_delete=forget)
        for informer in self.informers.all():
            informer.add_handlers(handlers)

    def _export_metrics(self, registry: Registry) -> None:
        """The object gauges (from the caches) and whether this replica leads or is ready."""
        inf = self.informers
        registry.add(
            ObjectMetrics(
                vmis=inf.vmis.store.list, vms=inf.vms.store.list, vmims=inf.migrations.store.list
            )
        )
        metrics_fleet.register(registry, inf)
        registry.gauge(
            "kubevirt_virt_controller_leading_status",
            "Indication for an operating virt-controller.",
        ).labels().set_function(lambda: float(self.elector.is_leader.is_set()))
        registry.gauge(
            "kubevirt_virt_controller_ready_status",
            "Indication for a virt-controller that is ready to take the lead.",
        ).labels().set_function(lambda: float(self.ready()))

    def ready(self) -> bool:
        """Every informer has listed once (leader or warm standby)."""
        return all(i.has_synced.is_set() for i in self.informers.all())

    async def run(self) -> None:
        """Serve until cancelled (or until the Lease is lost: LeadershipLost)."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.health.run(), name="health")
            tg.create_task(self.recorder.run(), name="event-recorder")
            for informer in self.informers.all():
                tg.create_task(informer.run(), name=f"informer-{informer.name}")
            tg.create_task(self.elector.run(self._lead), name="leader-election")

    def open_queues(self) -> int:
        """Elected: the queues accept keys from now on, and every cached object is
        re-delivered to the handlers, which queue its keys as for a change (each key once:
        the queues dedupe). No await between the two, so no event falls in a gap; objects
        the informers deliver later are queued by their own events. Returns the keys queued."""
        self.leading.set()
        for informer in self.informers.all():
            informer.resync()
        return sum(len(loop.queue) for loop, _ in self.loops.workers(self.config.workers))

    async def _lead(self) -> None:
        log.info("leading", identity=self.config.leader.identity)
        log.info("queues_resynced", keys=self.open_queues())
        await wait_for_sync(*self.informers.all(), timeout=SYNC_TIMEOUT)
        workers = self.config.workers
        loops = self.loops
        await loops.run.vmi.prepare(self.config.namespace or None)
        async with asyncio.TaskGroup() as tg:
            for loop, count in loops.workers(workers):
                tg.create_task(loop.queue.run_workers(count, loop.process))
            if self.config.sync.enabled:  # decentralized migration's endpoint: the leader's
                desk = loops.run.migration.decentral.desk
                server = SyncServer(self.config.sync, answer=desk.answer)
                tg.create_task(server.run(), name="sync-server")


def _leader_config(config: Config) -> LeaderConfig:
    """client-go's 15/10/2 s ratios, scaled to the configured lease duration."""
    lease = config.leader.lease_seconds
    return LeaderConfig(
        name=config.leader.name,
        namespace=config.leader.namespace,
        identity=config.leader.identity,
        lease_duration=lease,
        renew_deadline=lease * 2 / 3,
        retry_period=lease * 2 / 15,
    )
