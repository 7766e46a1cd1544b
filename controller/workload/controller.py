"""The workload updater: after the manifests were re-applied with a new launcher image, the
running VMIs still in launchers of the old one are live-migrated onto the new one, a batch
at a time (logic.py decides); those that cannot migrate are left, labelled and counted.

One key ("cluster") is synced on any VMI or launcher pod change and every RESYNC seconds
while outdated VMIs remain. Only with "LiveMigrate" in the KubeVirt CR's
spec.workloadUpdateStrategy.workloadUpdateMethods (manifests/kubevirt-cr.yaml sets it).
VMIs whose launcher pod has other multus attachments than their spec wants (a NIC
hot-plugged or unplugged, a NAD swapped: networks.py) are migrated whatever the methods,
as KubeVirt's MigrationRequired VMIs are.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import structlog

from controller.deps import Deps
from controller.informers import VMI_UID_INDEX
from controller.reconcile import Reconciler
from controller.workload.logic import OUTDATED_LABEL, WORKLOAD_UPDATE_ANNOTATION, plan_updates
from controller.workload.networks import NETWORK_UPDATE_ANNOTATION, plan_network_migrations
from shared.clusterconfig import ClusterConfig
from shared.kube import VMIMS, VMIS, Gauge, Handlers, NotFound, WorkQueue
from shared.launcherpod import LauncherPod
from shared.model import API_VERSION, VirtualMachineInstance, VirtualMachineInstanceMigration

log = structlog.get_logger("controller.workload")

KEY = "cluster"
RESYNC = 10.0
# A migration we created that the informer has not shown yet counts as in flight this long.
PENDING_SECONDS = 60.0


class WorkloadUpdater(Reconciler):
    """Moves VMIs off outdated launcher images by live migration."""

    kind = "workload"

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        image: Callable[[], str],
        cluster: Callable[[], ClusterConfig],
        outdated: Gauge,
    ) -> None:
        super().__init__(deps, queue)
        self._image = image
        self._cluster = cluster
        self._outdated = outdated
        self._pending: dict[str, float] = {}
        self._created: dict[str, str] = {}  # VMI key → the name of the VMIM made for it

    def handlers(self) -> tuple[Handlers[VirtualMachineInstance], Handlers[LauncherPod]]:
        """Callbacks for the VMI and pod informers: any change re-plans."""
        vmis: Handlers[VirtualMachineInstance] = Handlers(
            on_add=lambda _: self.enqueue(KEY), on_update=lambda _o, _n: self.enqueue(KEY)
        )
        pods: Handlers[LauncherPod] = Handlers(
            on_add=lambda _: self.enqueue(KEY), on_delete=lambda _: self.enqueue(KEY)
        )
        return vmis, pods

    async def sync(self, key: str) -> None:
        inf = self._informers
        vmis = inf.vmis.store.list()
        pods_of = {v.uid: inf.pods.store.by_index(VMI_UID_INDEX, v.uid) for v in vmis}
        cluster = self._cluster()
        now = time.monotonic()
        migrations = inf.migrations.store.list()
        seen = {m.metadata.name for m in migrations}  # the informer shows it: no longer pending
        self._pending = {
            k: t
            for k, t in self._pending.items()
            if now - t < PENDING_SECONDS and self._created.get(k) not in seen
        }
        self._created = {k: n for k, n in self._created.items() if k in self._pending}
        plan = plan_updates(
            vmis,
            pods_of,
            migrations,
            image=self._image(),
            batch=cluster.batch_eviction_size,
            pending=frozenset(self._pending),
        )
        self._outdated.labels().set(float(len(plan.outdated)))
        for vmi in vmis:
            await self._label(vmi, outdated=vmi.key in plan.outdated)
        if "LiveMigrate" in cluster.workload_update_methods:
            for vmi in plan.migrate:
                await self._migrate(vmi)
        if plan.stuck:
            log.info("workload_update_not_migratable", vmis=list(plan.stuck))
        if await self._network_updates(vmis, pods_of, migrations) or plan.outdated:
            self.queue.add_after(KEY, RESYNC)

    async def _network_updates(
        self,
        vmis: Sequence[VirtualMachineInstance],
        pods_of: Mapping[str, Sequence[LauncherPod]],
        migrations: Sequence[VirtualMachineInstanceMigration],
    ) -> bool:
        """Migrate the VMIs whose pod lacks (or has extra) multus attachments (NIC hotplug,
        controller/workload/networks.py); whether any VMI still waits for one."""
        moving = {m.vmi_key for m in migrations if not m.is_final()} | set(self._pending)
        plan = plan_network_migrations(vmis, pods_of, moving=frozenset(moving))
        for vmi in plan.ready:
            await self._migrate(vmi, annotation=NETWORK_UPDATE_ANNOTATION,
                                prefix="kubevirt-network-update-")  # fmt: skip
        if plan.stuck:
            log.info("network_update_not_migratable", vmis=list(plan.stuck))
        return plan.needed

    async def _label(self, vmi: VirtualMachineInstance, *, outdated: bool) -> None:
        if (OUTDATED_LABEL in vmi.metadata.labels) == outdated:
            return
        patch = {"metadata": {"labels": {OUTDATED_LABEL: "" if outdated else None}}}
        try:
            await self._client.patch(VMIS, vmi.name, patch, namespace=vmi.namespace)
        except NotFound:
            return

    async def _migrate(
        self,
        vmi: VirtualMachineInstance,
        *,
        annotation: str = WORKLOAD_UPDATE_ANNOTATION,
        prefix: str = "kubevirt-workload-update-",
    ) -> None:
        body = {
            "apiVersion": API_VERSION,
            "kind": VirtualMachineInstanceMigration.KIND,
            "metadata": {
                "generateName": prefix,
                "namespace": vmi.namespace,
                "annotations": {annotation: ""},
            },
            "spec": {"vmiName": vmi.name},
        }
        self._pending[vmi.key] = time.monotonic()
        created = await self._client.create(VMIMS, body, namespace=vmi.namespace)
        name = (created.get("metadata") or {}).get("name")
        self._created[vmi.key] = str(name)
        log.info("workload_update_migration_created", vmi=vmi.key, migration=name)
