"""The API resources the daemons touch, and how their REST paths are built.

One generic path builder serves core (`/api/v1/...`) and group (`/apis/g/v/...`) resources
alike, so Pods, Nodes, Leases, Events and the kubevirt.io CRs share one client code path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from shared.apigroup import GROUP, VERSION


@dataclass(frozen=True, slots=True)
class Resource:
    """A REST resource: group ("" for core), version, plural and whether it is namespaced."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """apiVersion as objects carry it ("v1", "kubevirt.io/v1")."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The request path; without `namespace` a namespaced resource lists cluster-wide."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [base]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name is not None:
            parts.append(quote(name, safe=""))
            if subresource:
                parts.append(subresource)
        return "/".join(parts)

    def template(self, *, namespaced: bool, named: bool, subresource: str | None = None) -> str:
        """The path with placeholders, the `url` label of latency metrics (low cardinality)."""
        return (
            self.path(
                namespace="{namespace}" if namespaced else None,
                name="{name}" if named else None,
                subresource=subresource,
            )
            .replace("%7B", "{")
            .replace("%7D", "}")
        )


PODS = Resource("", "v1", "pods", "Pod")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
EVENTS = Resource("", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
VMIS = Resource(GROUP, VERSION, "virtualmachineinstances", "VirtualMachineInstance")
VMS = Resource(GROUP, VERSION, "virtualmachines", "VirtualMachine")
VMIMS = Resource(
    GROUP, VERSION, "virtualmachineinstancemigrations", "VirtualMachineInstanceMigration"
)
KUBEVIRTS = Resource(GROUP, VERSION, "kubevirts", "KubeVirt")
MIGRATION_POLICIES = Resource(
    "migrations.kubevirt.io", "v1alpha1", "migrationpolicies", "MigrationPolicy", namespaced=False
)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
VMIRSS = Resource(
    GROUP, VERSION, "virtualmachineinstancereplicasets", "VirtualMachineInstanceReplicaSet"
)
VMPOOLS = Resource("pool.kubevirt.io", "v1beta1", "virtualmachinepools", "VirtualMachinePool")
SUBRESOURCES_GROUP = "subresources.kubevirt.io"
# The aggregated API's view of VMIs: imperative actions such as .../pause live under it.
VMI_ACTIONS = Resource(
    SUBRESOURCES_GROUP, VERSION, "virtualmachineinstances", "VirtualMachineInstance"
)
SERVICES = Resource("", "v1", "services", "Service")
PDBS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
# CDI's DataVolumes (the CRD is kubevirt-py's own copy: manifests/base/crd-datavolumes.yaml).
STORAGECLASSES = Resource(
    "storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False
)
CSIDRIVERS = Resource("storage.k8s.io", "v1", "csidrivers", "CSIDriver", namespaced=False)
DATAVOLUMES = Resource("cdi.kubevirt.io", "v1beta1", "datavolumes", "DataVolume")
SECRETS = Resource("", "v1", "secrets", "Secret")
VMEXPORTS = Resource(
    "export.kubevirt.io", "v1beta1", "virtualmachineexports", "VirtualMachineExport"
)
# snapshot.kubevirt.io (controller/snapshot/) and the CSI VolumeSnapshots under them.
VMSNAPSHOTS = Resource(
    "snapshot.kubevirt.io", "v1beta1", "virtualmachinesnapshots", "VirtualMachineSnapshot"
)
VMSNAPSHOTCONTENTS = Resource(
    "snapshot.kubevirt.io",
    "v1beta1",
    "virtualmachinesnapshotcontents",
    "VirtualMachineSnapshotContent",
)
VMRESTORES = Resource(
    "snapshot.kubevirt.io", "v1beta1", "virtualmachinerestores", "VirtualMachineRestore"
)
VMCLONES = Resource("clone.kubevirt.io", "v1beta1", "virtualmachineclones", "VirtualMachineClone")
# backup.kubevirt.io (controller/backup/).
VMBACKUPS = Resource(
    "backup.kubevirt.io", "v1alpha1", "virtualmachinebackups", "VirtualMachineBackup"
)
VMBACKUPTRACKERS = Resource(
    "backup.kubevirt.io",
    "v1alpha1",
    "virtualmachinebackuptrackers",
    "VirtualMachineBackupTracker",
)
VOLUMESNAPSHOTS = Resource("snapshot.storage.k8s.io", "v1", "volumesnapshots", "VolumeSnapshot")
DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet")
NADS = Resource(
    "k8s.cni.cncf.io", "v1", "network-attachment-definitions", "NetworkAttachmentDefinition"
)
VOLUMESNAPSHOTCLASSES = Resource(
    "snapshot.storage.k8s.io",
    "v1",
    "volumesnapshotclasses",
    "VolumeSnapshotClass",
    namespaced=False,
)


def with_kind(resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    """List items and some answers omit apiVersion/kind; fill them so models parse alike."""
    obj.setdefault("apiVersion", resource.api_version)
    obj.setdefault("kind", resource.kind)
    return obj


def object_key(obj: Mapping[str, Any]) -> str:
    """ "namespace/name" of a raw object ("name" when cluster-scoped)."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return ""
    name, namespace = meta.get("name") or "", meta.get("namespace") or ""
    return f"{namespace}/{name}" if namespace else str(name)


def split_key(key: str) -> tuple[str | None, str]:
    """ "ns/name" → ("ns", "name"); "name" → (None, "name")."""
    namespace, sep, name = key.partition("/")
    return (namespace, name) if sep else (None, namespace)
