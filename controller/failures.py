"""Which object a loop's unexpected sync error is written on (shared.kube.syncfailure):
each loop names the informer its keys come from; loops whose keys name no object of their
own (node, drain, workload updater) name none and only log."""

from __future__ import annotations

from controller.informers import Informers
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
    Resource,
)
from shared.kube.resources import VMBACKUPS, VMEXPORTS
from shared.kube.syncfailure import FailureTarget

# informer name → its resource
RESOURCES: dict[str, Resource] = {
    "vmis": VMIS,
    "vms": VMS,
    "migrations": VMIMS,
    "replicasets": VMIRSS,
    "pools": VMPOOLS,
    "datavolumes": DATAVOLUMES,
    "exports": VMEXPORTS,
    "snapshots": VMSNAPSHOTS,
    "restores": VMRESTORES,
    "clones": VMCLONES,
    "kubevirts": KUBEVIRTS,
    "backups": VMBACKUPS,
}
# Kinds whose own logic sets Synchronized: only the condition this writer made is cleared.
OWN_SYNCHRONIZED = frozenset({"vmis"})


def failure_target(informers: Informers | None, informer: str | None) -> FailureTarget | None:
    """The target of a loop whose keys come from `informer` (None: log only)."""
    if informers is None or informer is None:
        return None
    return FailureTarget(
        resource=RESOURCES[informer],
        store=getattr(informers, informer).store,
        owns_condition=informer not in OWN_SYNCHRONIZED,
    )
