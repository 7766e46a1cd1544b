"""The disruption-budget controller: one PodDisruptionBudget per VMI whose eviction
strategy protects it (shared/eviction.py decides, controller/drain/budget_logic.py names and
renders), widened to both pods while a migration runs, deleted when no longer needed.

Keyed by the VMI's key; woken by the VMI, its launcher pods and the budget itself.
Expectations guard creates and deletes, so a lagging cache never makes a second one.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from controller.config import MigrationConfig
from controller.deps import Deps
from controller.drain.budget_logic import BudgetView, budget_body, budget_name
from controller.informers import VMI_UID_INDEX
from controller.reconcile import Reconciler, live
from shared.eviction import budget_min_available
from shared.kube import (
    PDBS,
    AlreadyExists,
    ApiError,
    Conflict,
    DeleteOptions,
    Expectations,
    Handlers,
    NotFound,
    TransportError,
    WorkQueue,
)
from shared.launcherpod import LauncherPod
from shared.model import VirtualMachineInstance

log = structlog.get_logger("controller.disruption_budget")


class DisruptionBudgetController(Reconciler):
    """Keeps each protected VMI's PodDisruptionBudget as the strategy table wants it."""

    kind = "vmi"

    def __init__(
        self,
        deps: Deps,
        *,
        queue: WorkQueue,
        config: MigrationConfig | Callable[[], MigrationConfig],
        expectations: Expectations | None = None,
    ) -> None:
        super().__init__(deps, queue)
        self._config_of = live(config)
        self._expectations = expectations or Expectations()

    def handlers(
        self,
    ) -> tuple[Handlers[VirtualMachineInstance], Handlers[LauncherPod], Handlers[BudgetView]]:
        """Callbacks for the VMI, pod and budget informers."""
        vmis: Handlers[VirtualMachineInstance] = Handlers.each(lambda v: self.enqueue(v.key))
        pods: Handlers[LauncherPod] = Handlers.each(lambda p: self.enqueue(p.vmi_key))
        budgets: Handlers[BudgetView] = Handlers(
            on_add=self._budget_added,
            on_update=lambda old, new: self.enqueue(new.vmi_key),
            on_delete=self._budget_deleted,
        )
        return vmis, pods, budgets

    def _budget_added(self, budget: BudgetView) -> None:
        if budget.vmi_key:
            self._expectations.creation_observed(budget.vmi_key)
        self.enqueue(budget.vmi_key)

    def _budget_deleted(self, budget: BudgetView) -> None:
        if budget.vmi_key:
            self._expectations.deletion_observed(budget.vmi_key, budget.uid)
        self.enqueue(budget.vmi_key)

    async def sync(self, key: str) -> None:
        if not self._expectations.satisfied(key):
            return
        namespace, _, name = key.partition("/")
        vmi = self._informers.vmis.store.get(key)
        budget = self._informers.pdbs.store.get(f"{namespace}/{budget_name(name)}")
        want = None
        if vmi is not None:
            pods = self._informers.pods.store.by_index(VMI_UID_INDEX, vmi.uid)
            live = sum(1 for p in pods if not p.gone_or_going)
            want = budget_min_available(
                vmi, live_pods=live, default=self._config_of().eviction_strategy
            )
        if budget is not None and (want is None or vmi is None or budget.vmi_uid != vmi.uid):
            await self._delete(key, budget)
        elif vmi is not None and want is not None and budget is None:
            await self._create(key, vmi, want)
        elif budget is not None and want is not None and budget.min_available != want:
            await self._client.patch(
                PDBS, budget.name, {"spec": {"minAvailable": want}}, namespace=namespace
            )
            log.info("disruption_budget_updated", budget=budget.name, min_available=want)

    async def _create(self, key: str, vmi: VirtualMachineInstance, want: int) -> None:
        body = budget_body(vmi, want)
        self._expectations.expect_creations(key, 1)
        try:
            await self._client.create(PDBS, body, namespace=vmi.metadata.namespace)
        except AlreadyExists:
            return  # the cache lags; its add event satisfies the expectation
        except (ApiError, TransportError):
            self._expectations.creation_observed(key)
            raise
        log.info("disruption_budget_created", budget=body["metadata"]["name"], min_available=want)

    async def _delete(self, key: str, budget: BudgetView) -> None:
        self._expectations.expect_deletions(key, [budget.uid])
        try:
            await self._client.delete(
                PDBS, budget.name, namespace=budget.namespace, options=DeleteOptions(uid=budget.uid)
            )
        except (NotFound, Conflict):
            self._expectations.deletion_observed(key, budget.uid)
            return
        except (ApiError, TransportError):
            self._expectations.deletion_observed(key, budget.uid)
            raise
        log.info("disruption_budget_deleted", budget=budget.name)
