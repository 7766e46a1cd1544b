"""The controller's loops: one Reconciler per family, each with its queue and its handlers.

    run path: vmi, vm, migration, node, budgets, evacuation, kubevirt, workload
    families: replicaset, pool, datavolume, export, snapshot, restore, clone, backup

Built once by `build_loops`; `Loops.register` wires each loop's handlers to the informers it
watches, and `Loops.workers` says how many workers each queue runs while leading.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from controller.backup.controller import BackupController, TargetImage
from controller.config import Config, MigrationConfig, WorkerCounts
from controller.datavolume.controller import DataVolumeController, WorkerImage
from controller.deps import Deps
from controller.drain.budgets import DisruptionBudgetController
from controller.drain.evacuation import EvacuationController
from controller.export.controller import ExportController, ExporterImage
from controller.informers import Informers
from controller.kubevirt.controller import KubeVirtController
from controller.kubevirt.live import migration_config, template_config
from controller.migration.controller import MigrationController
from controller.node.controller import NodeController
from controller.pool.controller import PoolController
from controller.reconcile import PodWriter, Reconciler
from controller.replicaset.controller import ReplicaSetController
from controller.services.template import TemplateService
from controller.snapshot.clone import CloneController
from controller.snapshot.controller import SnapshotController
from controller.snapshot.restore import RestoreController
from controller.uploadclaim.controller import UploadClaimController
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
    Expectations,
    QueueConfig,
    Registry,
    StatusWriter,
    StatusWriterConfig,
    WorkQueue,
)
from shared.kube.resources import VMBACKUPS, VMEXPORTS
from shared.model import (
    VirtualMachine,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VirtualMachineInstanceReplicaSet,
)
from shared.model.backup import VirtualMachineBackup
from shared.model.clone import VirtualMachineClone
from shared.model.datavolume import DataVolume
from shared.model.export import VirtualMachineExport
from shared.model.kubevirt import KubeVirt
from shared.model.pool import VirtualMachinePool
from shared.model.snapshot import VirtualMachineRestore, VirtualMachineSnapshot

#: Workers per queue for the loops WorkerCounts has no flag for (KubeVirt's counts).
SINGLE = 1
SNAPSHOT_WORKERS = 2
# Bare upload claims (image-upload pvc): rare, each sync a few GETs.
UPLOAD_CLAIM_WORKERS = 1


@dataclass(frozen=True, slots=True)
class RunPath:
    """The loops that run a VM: VMI, VM, migration, node, drain, KubeVirt CR, updater."""

    vmi: VMIController
    vm: VMController
    migration: MigrationController
    node: NodeController
    budgets: DisruptionBudgetController
    evacuation: EvacuationController
    kubevirt: KubeVirtController
    workload: WorkloadUpdater

    def workers(self, counts: WorkerCounts) -> tuple[tuple[Reconciler, int], ...]:
        return (
            (self.vmi, counts.vmi),
            (self.vm, counts.vm),
            (self.migration, counts.migration),
            (self.node, counts.node),
            (self.budgets, counts.budget),
            (self.evacuation, counts.evacuation),
            (self.kubevirt, SINGLE),
            (self.workload, SINGLE),
        )

    def register(self, inf: Informers) -> None:
        vmi_h, pod_h = self.vmi.handlers()
        inf.vmis.add_handlers(vmi_h)
        inf.pods.add_handlers(pod_h)
        vm_h, vmi_for_vm = self.vm.handlers()
        inf.vms.add_handlers(vm_h)
        inf.vmis.add_handlers(vmi_for_vm)
        mig_h, vmi_for_mig, pod_for_mig = self.migration.handlers()
        inf.migrations.add_handlers(mig_h)
        inf.vmis.add_handlers(vmi_for_mig)
        inf.pods.add_handlers(pod_for_mig)
        node_h, pod_for_node = self.node.handlers()
        inf.nodes.add_handlers(node_h)
        inf.pods.add_handlers(pod_for_node)
        vmi_for_pdb, pod_for_pdb, pdb_h = self.budgets.handlers()
        inf.vmis.add_handlers(vmi_for_pdb)
        inf.pods.add_handlers(pod_for_pdb)
        inf.pdbs.add_handlers(pdb_h)
        vmi_for_evac, mig_for_evac = self.evacuation.handlers()
        inf.vmis.add_handlers(vmi_for_evac)
        inf.migrations.add_handlers(mig_for_evac)
        inf.kubevirts.add_handlers(self.kubevirt.handlers())
        vmi_for_update, pod_for_update = self.workload.handlers()
        inf.vmis.add_handlers(vmi_for_update)
        inf.pods.add_handlers(pod_for_update)
        inf.datavolumes.add_handlers(self.vm.datavolume_handlers())
        inf.datavolumes.add_handlers(self.vmi.datavolume_handlers())
        inf.claims.add_handlers(self.vmi.claim_handlers())


@dataclass(frozen=True, slots=True)
class Families:
    """KubeVirt's other families: replica sets, pools, DataVolumes, snapshots, clones, exports."""

    replicaset: ReplicaSetController
    pool: PoolController
    datavolume: DataVolumeController
    uploadclaim: UploadClaimController
    export: ExportController
    snapshot: SnapshotController
    restore: RestoreController
    clone: CloneController
    backup: BackupController

    def workers(self, counts: WorkerCounts) -> tuple[tuple[Reconciler, int], ...]:
        return (
            (self.replicaset, counts.replicaset),
            (self.pool, counts.pool),
            (self.datavolume, counts.datavolume),
            (self.uploadclaim, UPLOAD_CLAIM_WORKERS),
            (self.export, counts.export),
            (self.snapshot, SNAPSHOT_WORKERS),
            (self.restore, SNAPSHOT_WORKERS),
            (self.clone, SNAPSHOT_WORKERS),
            (self.backup, SNAPSHOT_WORKERS),
        )

    def register(self, inf: Informers) -> None:
        rs_h, vmi_for_rs = self.replicaset.handlers()
        inf.replicasets.add_handlers(rs_h)
        inf.vmis.add_handlers(vmi_for_rs)
        pool_h, vm_for_pool = self.pool.handlers()
        inf.pools.add_handlers(pool_h)
        inf.vms.add_handlers(vm_for_pool)
        inf.vmis.add_handlers(self.pool.vmi_handlers())
        inf.datavolumes.add_handlers(self.datavolume.handlers())
        inf.workers.add_handlers(self.datavolume.worker_handlers())
        inf.claims.add_handlers(self.uploadclaim.handlers())
        inf.exports.add_handlers(self.export.handlers())
        inf.snapshots.add_handlers(self.snapshot.handlers())
        inf.restores.add_handlers(self.restore.handlers())
        inf.clones.add_handlers(self.clone.handlers())
        inf.backups.add_handlers(self.backup.handlers())


@dataclass(frozen=True, slots=True)
class Loops:
    """Every controller loop, each with its queue."""

    run: RunPath
    families: Families

    def workers(self, counts: WorkerCounts) -> tuple[tuple[Reconciler, int], ...]:
        """Each loop and how many workers its queue runs while leading."""
        return self.run.workers(counts) + self.families.workers(counts)

    def register(self, inf: Informers) -> None:
        """Wire every loop's handlers to the informers it watches."""
        self.run.register(inf)
        self.families.register(inf)


def build_loops(config: Config, deps: Deps, registry: Registry, live: LiveConfig) -> Loops:
    """Every loop, reading the KubeVirt CR's live configuration over the flags."""
    return Loops(
        run=_run_path(config, deps, registry, live),
        families=_families(config, deps, registry, live),
    )


def _queue(name: str, deps: Deps, registry: Registry) -> WorkQueue:
    """A loop's queue, gated by `deps.leading` (a standby's queues stay empty)."""
    config = QueueConfig(name=f"virt-controller-{name}")
    return WorkQueue(config, registry=registry, gate=deps.leading)


def _run_path(config: Config, deps: Deps, registry: Registry, live: LiveConfig) -> RunPath:
    client = deps.client

    def templates() -> TemplateService:
        return TemplateService(template_config(config.template, live.current()))

    def migrations() -> MigrationConfig:
        return migration_config(config.migration, live.current())

    return RunPath(
        vmi=_vmi(config, deps, registry, templates=templates),
        vm=VMController(
            deps,
            queue=_queue("vm", deps, registry),
            expectations=Expectations(),
            writer=StatusWriter(client, VMS, model=VirtualMachine, registry=registry),
            timing=config.timing,
            rollout=lambda: live.current().vm_rollout_strategy,
            hotplug_limits=lambda: HotplugLimits.of(live.current()),
        ),
        migration=MigrationController(
            deps,
            queue=_queue("migration", deps, registry),
            pods=PodWriter(client, Expectations(), deps.recorder),
            writer=StatusWriter(
                client, VMIMS, model=VirtualMachineInstanceMigration, registry=registry
            ),
            templates=templates,
            config=migrations,
            sync=config.sync,
        ),
        kubevirt=KubeVirtController(
            deps,
            queue=_queue("kubevirt", deps, registry),
            live=live,
            writer=StatusWriter(client, KUBEVIRTS, model=KubeVirt, registry=registry),
            sync_addresses=config.sync.addresses(),
        ),
        workload=_workload(config, deps, registry, live),
        node=NodeController(deps, queue=_queue("node", deps, registry), timing=config.timing),
        budgets=DisruptionBudgetController(
            deps, queue=_queue("disruption-budget", deps, registry), config=migrations
        ),
        evacuation=EvacuationController(
            deps, queue=_queue("evacuation", deps, registry), config=migrations
        ),
    )


def _families(config: Config, deps: Deps, registry: Registry, live: LiveConfig) -> Families:
    writer = partial(StatusWriter, deps.client, registry=registry)
    image = config.template.launcher_image
    pull = config.template.image_pull_policy

    return Families(
        replicaset=ReplicaSetController(
            deps,
            queue=_queue("replicaset", deps, registry),
            expectations=Expectations(),
            writer=writer(VMIRSS, model=VirtualMachineInstanceReplicaSet),
            timing=config.timing,
        ),
        pool=PoolController(
            deps,
            queue=_queue("pool", deps, registry),
            expectations=Expectations(),
            writer=writer(VMPOOLS, model=VirtualMachinePool),
        ),
        datavolume=DataVolumeController(
            deps,
            queue=_queue("datavolume", deps, registry),
            writer=writer(DATAVOLUMES, model=DataVolume),
            worker=WorkerImage(image=image, pull_policy=pull),
        ),
        uploadclaim=UploadClaimController(
            deps,
            queue=_queue("uploadclaim", deps, registry),
            worker=WorkerImage(image=image, pull_policy=pull),
        ),
        export=ExportController(
            deps,
            queue=_queue("export", deps, registry),
            writer=writer(VMEXPORTS, model=VirtualMachineExport),
            exporter=ExporterImage(image=image, pull_policy=pull),
        ),
        snapshot=SnapshotController(
            deps,
            queue=_queue("vmsnapshot", deps, registry),
            writer=writer(VMSNAPSHOTS, model=VirtualMachineSnapshot),
        ),
        restore=RestoreController(
            deps,
            queue=_queue("vmrestore", deps, registry),
            writer=writer(VMRESTORES, model=VirtualMachineRestore),
        ),
        clone=CloneController(
            deps,
            queue=_queue("vmclone", deps, registry),
            writer=writer(VMCLONES, model=VirtualMachineClone),
        ),
        backup=BackupController(
            deps,
            queue=_queue("vmbackup", deps, registry),
            writer=writer(VMBACKUPS, model=VirtualMachineBackup),
            target=TargetImage(image=image, pull_policy=pull),
            cluster=live.current,
        ),
    )


def _vmi(
    config: Config, deps: Deps, registry: Registry, *, templates: Callable[[], TemplateService]
) -> VMIController:
    return VMIController(
        deps,
        queue=_queue("vmi", deps, registry),
        pods=PodWriter(deps.client, Expectations(), deps.recorder),
        # One attempt: a Conflict re-plans the sync from fresh state (KubeVirt's way).
        writer=StatusWriter(
            deps.client,
            VMIS,
            model=VirtualMachineInstance,
            registry=registry,
            config=StatusWriterConfig(max_attempts=1),
        ),
        templates=templates,
        timing=config.timing,
        hotplugs=HotplugAttachments(deps.client, config.template),
    )


def _workload(config: Config, deps: Deps, registry: Registry, live: LiveConfig) -> WorkloadUpdater:
    return WorkloadUpdater(
        deps,
        queue=_queue("workload-update", deps, registry),
        image=lambda: config.template.launcher_image,
        cluster=live.current,
        outdated=registry.gauge(
            "kubevirt_vmi_number_of_outdated",
            "VMIs running in a launcher of an image other than the current one.",
        ),
    )
