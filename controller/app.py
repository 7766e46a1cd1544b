"""The controller's object graph and its one TaskGroup.

    informers (always, so a standby has warm caches)  ┐
    /healthz /readyz /metrics                          ├─ one TaskGroup
    leader election → while leading: the work queues' workers ┘

A standby keeps its caches synced and its queues filling; on election its workers drain
them at once. Losing the Lease ends the daemon (LeadershipLost), as KubeVirt's does: the
Deployment restarts it as a standby.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog

from controller import metrics_fleet
from controller.config import Config, MigrationConfig
from controller.datavolume.controller import DataVolumeController, WorkerImage
from controller.deps import Deps
from controller.drain.budgets import DisruptionBudgetController
from controller.drain.evacuation import EvacuationController
from controller.export.controller import ExportController, ExporterImage
from controller.informers import Informers, SourceWrapper, build_informers
from controller.kubevirt.controller import KubeVirtController
from controller.kubevirt.live import cluster_defaults, migration_config, template_config
from controller.metrics import ObjectMetrics
from controller.migration.controller import MigrationController
from controller.node.controller import NodeController
from controller.pool.controller import PoolController
from controller.recent import Recent
from controller.reconcile import PodWriter
from controller.replicaset.controller import ReplicaSetController
from controller.services.template import TemplateService
from controller.snapshot.clone import CloneController
from controller.snapshot.controller import SnapshotController
from controller.snapshot.restore import RestoreController
from controller.vm.controller import VMController
from controller.vm.hotresources import HotplugLimits
from controller.vmi.controller import VMIController
from controller.vmi.hotplug import HotplugAttachments
from controller.workload.controller import WorkloadUpdater
from shared.clusterconfig import LiveConfig
from shared.kube import (
    DATAVOLUMES,
    KUBEVIRTS,
    VMCLONES,
    VMIMS,
    VMIRSS,
    VMIS,
    VMPOOLS,
    VMRESTORES,
    VMS,
    VMSNAPSHOTS,
    EventRecorder,
    Expectations,
    HealthConfig,
    HealthServer,
    KubeClient,
    LeaderConfig,
    LeaderElector,
    QueueConfig,
    RecorderConfig,
    Registry,
    StatusWriter,
    StatusWriterConfig,
    WorkQueue,
    serving_tls,
    wait_for_sync,
)
from shared.kube.resources import VMEXPORTS
from shared.model import (
    Clock,
    VirtualMachine,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VirtualMachineInstanceReplicaSet,
    utc_now,
)
from shared.model.clone import VirtualMachineClone
from shared.model.datavolume import DataVolume
from shared.model.export import VirtualMachineExport
from shared.model.kubevirt import KubeVirt
from shared.model.pool import VirtualMachinePool
from shared.model.snapshot import VirtualMachineRestore, VirtualMachineSnapshot

log = structlog.get_logger("controller")

SYNC_TIMEOUT = 300.0


@dataclass(frozen=True, slots=True)
class Loops:
    """The controllers, each with its queue."""

    vmi: VMIController
    vm: VMController
    migration: MigrationController
    node: NodeController
    budgets: DisruptionBudgetController
    evacuation: EvacuationController
    kubevirt: KubeVirtController
    workload: WorkloadUpdater
    replicaset: ReplicaSetController
    pool: PoolController
    datavolume: DataVolumeController
    export: ExportController
    snapshot: SnapshotController
    restore: RestoreController
    clone: CloneController


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
        )
        self.loops = _build_loops(config, deps, registry, self.live)
        self._register_handlers()
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

    async def _lead(self) -> None:
        log.info("leading", identity=self.config.leader.identity)
        await wait_for_sync(*self.informers.all(), timeout=SYNC_TIMEOUT)
        workers = self.config.workers
        loops = self.loops
        await loops.vmi.prepare(self.config.namespace or None)
        async with asyncio.TaskGroup() as tg:
            tg.create_task(loops.vmi.queue.run_workers(workers.vmi, loops.vmi.process))
            tg.create_task(loops.vm.queue.run_workers(workers.vm, loops.vm.process))
            tg.create_task(
                loops.migration.queue.run_workers(workers.migration, loops.migration.process)
            )
            tg.create_task(loops.node.queue.run_workers(workers.node, loops.node.process))
            tg.create_task(loops.budgets.queue.run_workers(workers.budget, loops.budgets.process))
            tg.create_task(
                loops.evacuation.queue.run_workers(workers.evacuation, loops.evacuation.process)
            )
            tg.create_task(loops.kubevirt.queue.run_workers(1, loops.kubevirt.process))
            tg.create_task(loops.workload.queue.run_workers(1, loops.workload.process))
            tg.create_task(
                loops.replicaset.queue.run_workers(workers.replicaset, loops.replicaset.process)
            )
            tg.create_task(loops.pool.queue.run_workers(workers.pool, loops.pool.process))
            tg.create_task(
                loops.datavolume.queue.run_workers(workers.datavolume, loops.datavolume.process)
            )
            tg.create_task(loops.export.queue.run_workers(workers.export, loops.export.process))
            tg.create_task(loops.snapshot.queue.run_workers(2, loops.snapshot.process))
            tg.create_task(loops.restore.queue.run_workers(2, loops.restore.process))
            tg.create_task(loops.clone.queue.run_workers(2, loops.clone.process))

    def _register_handlers(self) -> None:
        inf, loops = self.informers, self.loops
        vmi_h, pod_h = loops.vmi.handlers()
        inf.vmis.add_handlers(vmi_h)
        inf.pods.add_handlers(pod_h)
        vm_h, vmi_for_vm = loops.vm.handlers()
        inf.vms.add_handlers(vm_h)
        inf.vmis.add_handlers(vmi_for_vm)
        mig_h, vmi_for_mig, pod_for_mig = loops.migration.handlers()
        inf.migrations.add_handlers(mig_h)
        inf.vmis.add_handlers(vmi_for_mig)
        inf.pods.add_handlers(pod_for_mig)
        node_h, pod_for_node = loops.node.handlers()
        inf.nodes.add_handlers(node_h)
        inf.pods.add_handlers(pod_for_node)
        vmi_for_pdb, pod_for_pdb, pdb_h = loops.budgets.handlers()
        inf.vmis.add_handlers(vmi_for_pdb)
        inf.pods.add_handlers(pod_for_pdb)
        inf.pdbs.add_handlers(pdb_h)
        vmi_for_evac, mig_for_evac = loops.evacuation.handlers()
        inf.vmis.add_handlers(vmi_for_evac)
        inf.migrations.add_handlers(mig_for_evac)
        inf.kubevirts.add_handlers(loops.kubevirt.handlers())
        vmi_for_update, pod_for_update = loops.workload.handlers()
        inf.vmis.add_handlers(vmi_for_update)
        inf.pods.add_handlers(pod_for_update)
        rs_h, vmi_for_rs = loops.replicaset.handlers()
        inf.replicasets.add_handlers(rs_h)
        inf.vmis.add_handlers(vmi_for_rs)
        pool_h, vm_for_pool = loops.pool.handlers()
        inf.pools.add_handlers(pool_h)
        inf.vms.add_handlers(vm_for_pool)
        inf.datavolumes.add_handlers(loops.datavolume.handlers())
        inf.datavolumes.add_handlers(loops.vm.datavolume_handlers())
        inf.datavolumes.add_handlers(loops.vmi.datavolume_handlers())
        inf.exports.add_handlers(loops.export.handlers())
        inf.snapshots.add_handlers(loops.snapshot.handlers())
        inf.restores.add_handlers(loops.restore.handlers())
        inf.clones.add_handlers(loops.clone.handlers())
        inf.claims.add_handlers(loops.vmi.claim_handlers())


def _queue(name: str, registry: Registry) -> WorkQueue:
    return WorkQueue(QueueConfig(name=f"virt-controller-{name}"), registry=registry)


def _build_loops(config: Config, deps: Deps, registry: Registry, live: LiveConfig) -> Loops:
    client = deps.client

    def templates() -> TemplateService:
        return TemplateService(template_config(config.template, live.current()))

    def migrations() -> MigrationConfig:
        return migration_config(config.migration, live.current())

    return Loops(
        vmi=VMIController(
            deps,
            queue=_queue("vmi", registry),
            pods=PodWriter(client, Expectations(), deps.recorder),
            # One attempt: a Conflict re-plans the sync from fresh state (KubeVirt's way).
            writer=StatusWriter(
                client,
                VMIS,
                model=VirtualMachineInstance,
                registry=registry,
                config=StatusWriterConfig(max_attempts=1),
            ),
            templates=templates,
            timing=config.timing,
            hotplugs=HotplugAttachments(client, config.template),
        ),
        vm=VMController(
            deps,
            queue=_queue("vm", registry),
            expectations=Expectations(),
            writer=StatusWriter(client, VMS, model=VirtualMachine, registry=registry),
            timing=config.timing,
            rollout=lambda: live.current().vm_rollout_strategy,
            hotplug_limits=lambda: HotplugLimits.of(live.current()),
        ),
        migration=MigrationController(
            deps,
            queue=_queue("migration", registry),
            pods=PodWriter(client, Expectations(), deps.recorder),
            writer=StatusWriter(
                client, VMIMS, model=VirtualMachineInstanceMigration, registry=registry
            ),
            templates=templates,
            config=migrations,
        ),
        kubevirt=KubeVirtController(
            deps,
            queue=_queue("kubevirt", registry),
            live=live,
            writer=StatusWriter(client, KUBEVIRTS, model=KubeVirt, registry=registry),
        ),
        workload=WorkloadUpdater(
            deps,
            queue=_queue("workload-update", registry),
            image=lambda: config.template.launcher_image,
            cluster=live.current,
            outdated=registry.gauge(
                "kubevirt_vmi_number_of_outdated",
                "VMIs running in a launcher of an image other than the current one.",
            ),
        ),
        node=NodeController(deps, queue=_queue("node", registry), timing=config.timing),
        budgets=DisruptionBudgetController(
            deps, queue=_queue("disruption-budget", registry), config=migrations
        ),
        evacuation=EvacuationController(
            deps, queue=_queue("evacuation", registry), config=migrations
        ),
        replicaset=ReplicaSetController(
            deps,
            queue=_queue("replicaset", registry),
            expectations=Expectations(),
            writer=StatusWriter(
                client, VMIRSS, model=VirtualMachineInstanceReplicaSet, registry=registry
            ),
            timing=config.timing,
        ),
        pool=PoolController(
            deps,
            queue=_queue("pool", registry),
            expectations=Expectations(),
            writer=StatusWriter(client, VMPOOLS, model=VirtualMachinePool, registry=registry),
        ),
        datavolume=DataVolumeController(
            deps,
            queue=_queue("datavolume", registry),
            writer=StatusWriter(client, DATAVOLUMES, model=DataVolume, registry=registry),
            worker=WorkerImage(
                image=config.template.launcher_image,
                pull_policy=config.template.image_pull_policy,
            ),
        ),
        export=ExportController(
            deps,
            queue=_queue("export", registry),
            writer=StatusWriter(client, VMEXPORTS, model=VirtualMachineExport, registry=registry),
            exporter=ExporterImage(
                image=config.template.launcher_image,
                pull_policy=config.template.image_pull_policy,
            ),
        ),
        snapshot=SnapshotController(
            deps,
            queue=_queue("vmsnapshot", registry),
            writer=StatusWriter(
                client, VMSNAPSHOTS, model=VirtualMachineSnapshot, registry=registry
            ),
        ),
        restore=RestoreController(
            deps,
            queue=_queue("vmrestore", registry),
            writer=StatusWriter(client, VMRESTORES, model=VirtualMachineRestore, registry=registry),
        ),
        clone=CloneController(
            deps,
            queue=_queue("vmclone", registry),
            writer=StatusWriter(client, VMCLONES, model=VirtualMachineClone, registry=registry),
        ),
    )


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
