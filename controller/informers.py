"""The controller's five informers, their decoders and their indexes.

Decoders turn wire dicts into what the controllers read, and nothing more is kept:
managedFields are dropped before parsing (they are the bulk of a stored object and no
controller reads them), pods become `LauncherPod`, nodes `NodeView`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from controller.labels import APP_LABEL, LAUNCHER_APP
from controller.node_logic import NodeView, decode_node
from controller.pods import LauncherPod, decode_pod, node_of, vmi_uid_of
from shared.kube import (
    NODES,
    PODS,
    VMIMS,
    VMIS,
    VMS,
    Informer,
    InformerConfig,
    KubeClient,
    ListWatch,
    Resource,
    Selector,
    Source,
)
from shared.kube.store import IndexFunc
from shared.model import (
    KubeObject,
    VirtualMachine,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
)

UID_INDEX = "uid"
NODE_INDEX = "node"
VMI_UID_INDEX = "vmi-uid"
MIGRATION_UID_INDEX = "migration-uid"
VMI_KEY_INDEX = "vmi-key"

M = TypeVar("M", bound=KubeObject)
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


def _model_decoder(model: type[M]) -> Callable[[dict[str, Any]], M]:
    def decode(raw: dict[str, Any]) -> M:
        return model.from_dict(strip_managed_fields(raw))

    return decode


def by_uid(obj: KubeObject) -> list[str]:
    """Index: the object's UID."""
    return [obj.uid] if obj.uid else []


def vmi_by_node(vmi: VirtualMachineInstance) -> list[str]:
    """Index: status.nodeName (the node a VMI was handed to)."""
    return [vmi.status.node_name] if vmi.status.node_name else []


def migration_by_vmi(m: VirtualMachineInstanceMigration) -> list[str]:
    """Index: the "namespace/name" key of the VMI a migration moves."""
    return [m.vmi_key] if m.spec.vmi_name else []


def pod_by_migration(pod: LauncherPod) -> list[str]:
    """Index: the VMIM UID of a migration target pod."""
    return [pod.migration_uid] if pod.migration_uid else []


VMI_INDEXERS: Indexers[VirtualMachineInstance] = {UID_INDEX: by_uid, NODE_INDEX: vmi_by_node}
POD_INDEXERS: Indexers[LauncherPod] = {
    VMI_UID_INDEX: vmi_uid_of,
    NODE_INDEX: node_of,
    MIGRATION_UID_INDEX: pod_by_migration,
}
MIGRATION_INDEXERS: Indexers[Migration] = {UID_INDEX: by_uid, VMI_KEY_INDEX: migration_by_vmi}


@dataclass(frozen=True, slots=True)
class Informers:
    """Every cache the controllers read."""

    vmis: Informer[VirtualMachineInstance]
    pods: Informer[LauncherPod]
    vms: Informer[VirtualMachine]
    migrations: Informer[VirtualMachineInstanceMigration]
    nodes: Informer[NodeView]

    def all(self) -> tuple[Informer[Any], ...]:
        """In start order."""
        return (self.vmis, self.pods, self.vms, self.migrations, self.nodes)


def build_informers(
    client: KubeClient,
    *,
    namespace: str | None = None,
    resync_period: float = 0.0,
    wrap: SourceWrapper | None = None,
) -> Informers:
    """The informers over `client` (namespaced kinds limited to `namespace` when given);
    `wrap` may wrap each Source (tests delay one)."""
    scope = Selector(namespace=namespace or None)
    launchers = Selector(namespace=namespace or None, labels=f"{APP_LABEL}={LAUNCHER_APP}")

    def make(
        name: str, resource: Resource, selector: Selector, decode: Decode[T], idx: Indexers[T]
    ) -> Informer[T]:
        source: Source = ListWatch(client, resource, selector)
        if wrap is not None:
            source = wrap(name, source)
        config = InformerConfig(name=name, resync_period=resync_period)
        return Informer(source, config, decode=decode, indexers=idx)

    return Informers(
        vmis=make("vmis", VMIS, scope, _model_decoder(VirtualMachineInstance), VMI_INDEXERS),
        pods=make("pods", PODS, launchers, decode_pod, POD_INDEXERS),
        vms=make("vms", VMS, scope, _model_decoder(VirtualMachine), {}),
        migrations=make("migrations", VMIMS, scope, _model_decoder(Migration), MIGRATION_INDEXERS),
        nodes=make("nodes", NODES, Selector(), decode_node, {}),
    )
