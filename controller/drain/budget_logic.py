"""The PodDisruptionBudgets that protect launcher pods: their name, their body and the
compact view the controller's informer caches (as KubeVirt's disruption-budget controller).

One budget per protected VMI, named after it, owned by it (deleted with it by the garbage
collector), selecting its launcher pods by `kubevirt.io/created-by=<vmi uid>` — the source
pod and, while a migration runs, its target pod. The eviction API refuses (429) to evict a
pod that would leave fewer than `minAvailable` of them; the eviction webhook answers first,
the budget holds when the webhook cannot be reached (its failurePolicy is Ignore).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.kube import PDBS
from shared.labels import CREATED_BY_LABEL
from shared.model import API_VERSION, VirtualMachineInstance

BUDGET_PREFIX = "kubevirt-disruption-budget-"


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetView:
    """One of our PodDisruptionBudgets as the controller sees it."""

    namespace: str
    name: str
    uid: str
    vmi_uid: str | None = None
    min_available: int | None = None

    @property
    def vmi_key(self) -> str | None:
        """ "namespace/name" of the VMI it protects (from its name)."""
        if not self.name.startswith(BUDGET_PREFIX):
            return None
        return f"{self.namespace}/{self.name.removeprefix(BUDGET_PREFIX)}"


def budget_name(vmi_name: str) -> str:
    """The budget's name for a VMI."""
    return BUDGET_PREFIX + vmi_name


def decode_budget(raw: Mapping[str, Any]) -> BudgetView:
    """The view of a raw PodDisruptionBudget."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    labels = meta.get("labels") or {}
    value = spec.get("minAvailable")
    return BudgetView(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        vmi_uid=labels.get(CREATED_BY_LABEL),
        min_available=value if isinstance(value, int) else None,
    )


def budget_body(vmi: VirtualMachineInstance, min_available: int) -> dict[str, Any]:
    """A new budget for `vmi`'s launcher pods."""
    selector = {CREATED_BY_LABEL: vmi.uid}
    owner = {
        "apiVersion": API_VERSION,
        "kind": VirtualMachineInstance.KIND,
        "name": vmi.metadata.name,
        "uid": vmi.uid,
        "controller": True,
    }
    return {
        "apiVersion": PDBS.api_version,
        "kind": PDBS.kind,
        "metadata": {
            "name": budget_name(vmi.metadata.name or ""),
            "namespace": vmi.metadata.namespace,
            "labels": dict(selector),
            "ownerReferences": [owner],
        },
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": selector}},
    }
