"""The controller's informers, their decoders and their indexes.

Decoders turn wire dicts into what the controllers read, and nothing more is kept:
managedFields are dropped before parsing (they are the bulk of a stored object and no
controller reads them), pods become `LauncherPod`, nodes `NodeView`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from controller.datavolume.workers import WORKER_SELECTOR, WorkerView, decode_worker
from controller.drain.budget_logic import BudgetView, decode_budget
from controller.node.logic import NodeView, decode_node
from controller.recent import Recent
from controller.services.volumes.claims import Claim
from shared.kube import (
    DATAVOLUMES,
    KUBEVIRTS,
    MIGRATION_POLICIES,
    NAMESPACE_INDEX,
    NODES,
    OWNER_INDEX,
    PDBS,
    PODS,
    PVCS,
    VMCLONES,
    VMIMS,
    VMIRSS,
    VMIS,
    VMPOOLS,
    VMRESTORES,
    VMS,
    VMSNAPSHOTS,
    Informer,
    InformerConfig,
    KubeClient,
    ListWatch,
    Resource,
    Selector,
    Source,
    Store,
    object_key,
)
from shared.kube.resources import VMBACKUPS, VMEXPORTS
from shared.kube.store import IndexFunc, by_namespace, by_owner_uid
from shared.labels import APP_LABEL, CREATED_BY_LABEL, LAUNCHER_APP
from shared.launcherpod import LauncherPod, decode_pod, node_of, vmi_uid_of
from shared.model import (
    KubeObject,
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
from shared.model.migrationpolicy import MigrationPolicy
from shared.model.pool import VirtualMachinePool
from shared.model.snapshot import VirtualMachineRestore, VirtualMachineSnapshot

UID_INDEX = "uid"
NODE_INDEX = "node"
VMI_UID_INDEX = "vmi-uid"
MIGRATION_UID_INDEX = "migration-uid"
VMI_KEY_INDEX = "vmi-key"
MIGRATION_ID_INDEX = "migration-id"

M = TypeVar("M", bound=KubeObject)
# The models with a spec whose changes bump metadata.generation.
S = TypeVar(
    "S",
    VirtualMachinePool,
    VirtualMachineInstance,
    VirtualMachine,
    VirtualMachineInstanceMigration,
    VirtualMachineInstanceReplicaSet,
)
T = TypeVar("T")
SourceWrapper = Callable[[str, Source], Source]
Decode = Callable[[dict[str, Any]], T]
Indexers = Mapping[str, IndexFunc[T]]
Migration = VirtualMachineInstanceMigration


def strip_managed_fields(raw: dict[str, Any]) -> dict[str, Any]:
    """The object without metadata.managedFields (modified in place, returned)."""
    meta = raw.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return raw


class SpecReusingDecoder(Generic[S]):
    """`model.from_dict`, reusing the cached object's parsed spec while the object's
    metadata.generation is unchanged, and our own write's object for the event of it.

    The spec is most of a VMI and nearly every event changes only status or metadata: on
    a CRD with a status subresource the API server bumps metadata.generation on every
    spec change and on nothing else, so an equal generation (same UID) means an equal
    spec and parsing it again is wasted CPU.
    """

    def __init__(self, model: type[S], *, written: Callable[[str], S | None] | None = None) -> None:
        self._model: type[S] = model
        self._cached: Callable[[str], S | None] = lambda key: None
        # Our last write of a key (the planned object at the version the server answered):
        # the watch event of that very version decodes to an equal object.
        self._written: Callable[[str], S | None] = written or (lambda key: None)

    def attach(self, store: Store[S]) -> None:
        """Read previous versions from the informer's cache."""
        self._cached = store.get

    def __call__(self, raw: dict[str, Any]) -> S:
        strip_managed_fields(raw)
        meta = raw.get("metadata") or {}
        key = object_key(raw)
        mine = self._written(key)
        if (
            mine is not None
            and mine.metadata.resource_version == meta.get("resourceVersion")
            and mine.uid == meta.get("uid")
        ):
            return mine
        generation = meta.get("generation")
        prev = self._cached(key) if generation is not None else None
        if (
            prev is None
            or "spec" not in raw
            or prev.metadata.generation != generation
            or prev.uid != meta.get("uid")
        ):
            return self._model.from_dict(raw)
        obj = self._model.from_dict({k: v for k, v in raw.items() if k != "spec"})
        extra = dict(obj.extra)
        if "spec" in prev.extra:  # a present-but-empty spec is kept in extra
            extra["spec"] = prev.extra["spec"]
        return dataclasses.replace(obj, spec=prev.spec, extra=extra)


def by_uid(obj: KubeObject) -> list[str]:
    """Index: the object's UID."""
    return [obj.uid] if obj.uid else []


def vmi_by_node(vmi: VirtualMachineInstance) -> list[str]:
    """Index: status.nodeName (the node a VMI was handed to)."""
    return [vmi.status.node_name] if vmi.status.node_name else []


def migration_by_vmi(m: VirtualMachineInstanceMigration) -> list[str]:
    """Index: the "namespace/name" key of the VMI a migration moves."""
    return [m.vmi_key] if m.spec.vmi_name else []


def migration_by_id(m: VirtualMachineInstanceMigration) -> list[str]:
    """Index: a decentralized migration's migrationID (either half's)."""
    ids = {h.migration_id for h in (m.spec.send_to, m.spec.receive) if h and h.migration_id}
    return sorted(ids)


def pod_by_migration(pod: LauncherPod) -> list[str]:
    """Index: the VMIM UID of a migration target pod."""
    return [pod.migration_uid] if pod.migration_uid else []


VMI_INDEXERS: Indexers[VirtualMachineInstance] = {
    UID_INDEX: by_uid,
    NODE_INDEX: vmi_by_node,
    NAMESPACE_INDEX: by_namespace,
}
POD_INDEXERS: Indexers[LauncherPod] = {
    VMI_UID_INDEX: vmi_uid_of,
    NODE_INDEX: node_of,
    MIGRATION_UID_INDEX: pod_by_migration,
}
MIGRATION_INDEXERS: Indexers[Migration] = {
    UID_INDEX: by_uid,
    VMI_KEY_INDEX: migration_by_vmi,
    MIGRATION_ID_INDEX: migration_by_id,
}


@dataclass(frozen=True, slots=True)
class Informers:
    """Every cache the controllers read."""

    vmis: Informer[VirtualMachineInstance]
    pods: Informer[LauncherPod]
    vms: Informer[VirtualMachine]
    migrations: Informer[VirtualMachineInstanceMigration]
    nodes: Informer[NodeView]
    # The launcher pods' PodDisruptionBudgets (controller/drain/budget_logic.py).
    pdbs: Informer[BudgetView]
    # The KubeVirt CR(s) of the daemons' namespace: the live cluster configuration.
    kubevirts: Informer[KubeVirt]
    # MigrationPolicies (cluster-scoped), matched when a migration is handed over.
    policies: Informer[MigrationPolicy]
    replicasets: Informer[VirtualMachineInstanceReplicaSet]
    pools: Informer[VirtualMachinePool]
    # CDI's DataVolumes (controller/datavolume/).
    datavolumes: Informer[DataVolume]
    # Their worker pods (importer, clone, upload server): a pod's change syncs its DataVolume.
    workers: Informer[WorkerView]
    # export.kubevirt.io VirtualMachineExports (controller/export/).
    exports: Informer[VirtualMachineExport]
    # snapshot.kubevirt.io (controller/snapshot/).
    snapshots: Informer[VirtualMachineSnapshot]
    restores: Informer[VirtualMachineRestore]
    clones: Informer[VirtualMachineClone]
    # backup.kubevirt.io VirtualMachineBackups (controller/backup/).
    backups: Informer[VirtualMachineBackup]
    # PersistentVolumeClaims: a grown claim's capacity reaches its VMIs' volumeStatus.
    claims: Informer[Claim]

    def all(self) -> tuple[Informer[Any], ...]:
        """In start order."""
        return (
            self.kubevirts,
            self.vmis,
            self.pods,
            self.vms,
            self.migrations,
            self.nodes,
            self.pdbs,
            self.policies,
            self.replicasets,
            self.pools,
            self.datavolumes,
            self.workers,
            self.exports,
            self.snapshots,
            self.restores,
            self.clones,
            self.backups,
            self.claims,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Maker:
    """Builds one informer: a ListWatch (wrapped for tests), its config and decoder."""

    client: KubeClient
    resync_period: float
    wrap: SourceWrapper | None
    scope: Selector

    def make(
        self, name: str, resource: Resource, *, selector: Selector, decode: Decode[T]
    ) -> Informer[T]:
        return self.indexed(name, resource, selector=selector, decode=decode, idx={})

    def indexed(
        self,
        name: str,
        resource: Resource,
        *,
        selector: Selector,
        decode: Decode[T],
        idx: Indexers[T],
    ) -> Informer[T]:
        source: Source = ListWatch(self.client, resource, selector)
        if self.wrap is not None:
            source = self.wrap(name, source)
        config = InformerConfig(name=name, resync_period=self.resync_period)
        return Informer(source, config, decode=decode, indexers=idx)

    def scoped(self, name: str, resource: Resource, decode: Decode[T]) -> Informer[T]:
        """A namespaced kind decoded plainly (no indexers)."""
        return self.make(name, resource, selector=self.scope, decode=decode)

    def cluster(self, name: str, resource: Resource, decode: Decode[T]) -> Informer[T]:
        """A cluster-scoped kind (or every namespace's) decoded plainly."""
        return self.make(name, resource, selector=Selector(), decode=decode)

    def models(
        self,
        name: str,
        resource: Resource,
        model: type[S],
        *,
        idx: Indexers[S],
        written: Callable[[str], S | None] | None = None,
    ) -> Informer[S]:
        """A namespaced kind whose decoder reuses the cached spec when it did not change."""
        decode = SpecReusingDecoder(model, written=written)
        informer = self.indexed(name, resource, selector=self.scope, decode=decode, idx=idx)
        decode.attach(informer.store)
        return informer


def build_informers(
    client: KubeClient,
    *,
    namespace: str | None = None,
    resync_period: float = 0.0,
    wrap: SourceWrapper | None = None,
    vmi_writes: Recent[VirtualMachineInstance] | None = None,
    kubevirt_namespace: str = "kubevirt",
) -> Informers:
    """The informers over `client` (namespaced kinds limited to `namespace` when given);
    `wrap` may wrap each Source (tests delay one); `vmi_writes` are the VMI controller's
    own writes, whose watch events need no decoding."""
    ns = namespace or None
    m = _Maker(client=client, resync_period=resync_period, wrap=wrap, scope=Selector(namespace=ns))
    written = vmi_writes.get if vmi_writes is not None else None
    launchers = Selector(namespace=ns, labels=f"{APP_LABEL}={LAUNCHER_APP}")
    budgets = Selector(namespace=ns, labels=CREATED_BY_LABEL)
    kubevirt, kubevirt_decode = Selector(namespace=kubevirt_namespace), _plain(KubeVirt.from_dict)
    return Informers(
        vmis=m.models("vmis", VMIS, VirtualMachineInstance, idx=VMI_INDEXERS, written=written),
        pods=m.indexed("pods", PODS, selector=launchers, decode=decode_pod, idx=POD_INDEXERS),
        vms=m.models("vms", VMS, VirtualMachine, idx={OWNER_INDEX: by_owner_uid}),
        migrations=m.models("migrations", VMIMS, Migration, idx=MIGRATION_INDEXERS),
        nodes=m.cluster("nodes", NODES, decode_node),
        pdbs=m.make("pdbs", PDBS, selector=budgets, decode=decode_budget),
        kubevirts=m.make("kubevirts", KUBEVIRTS, selector=kubevirt, decode=kubevirt_decode),
        policies=m.cluster(
            "migrationpolicies", MIGRATION_POLICIES, _plain(MigrationPolicy.from_dict)
        ),
        replicasets=m.models(
            "replicasets",
            VMIRSS,
            VirtualMachineInstanceReplicaSet,
            idx={NAMESPACE_INDEX: by_namespace},
        ),
        pools=m.models("pools", VMPOOLS, VirtualMachinePool, idx={}),
        datavolumes=m.scoped("datavolumes", DATAVOLUMES, decode_datavolume),
        workers=m.make(
            "datavolume-workers",
            PODS,
            selector=Selector(namespace=ns, labels=WORKER_SELECTOR),
            decode=decode_worker,
        ),
        exports=m.scoped("exports", VMEXPORTS, _plain(VirtualMachineExport.from_dict)),
        snapshots=m.scoped("vmsnapshots", VMSNAPSHOTS, _plain(VirtualMachineSnapshot.from_dict)),
        restores=m.scoped("vmrestores", VMRESTORES, _plain(VirtualMachineRestore.from_dict)),
        clones=m.scoped("vmclones", VMCLONES, _plain(VirtualMachineClone.from_dict)),
        backups=m.scoped("vmbackups", VMBACKUPS, _plain(VirtualMachineBackup.from_dict)),
        claims=m.scoped("claims", PVCS, Claim.from_dict),
    )


def decode_datavolume(raw: dict[str, Any]) -> DataVolume:
    """A DataVolume without its managedFields."""
    return DataVolume.from_dict(strip_managed_fields(raw))


def _plain(model: Decode[T]) -> Decode[T]:
    """Decode with `model` (its from_dict) after dropping managedFields."""
    return lambda raw: model(strip_managed_fields(raw))
