"""A Reconciler wired to fakes, with hand-driven clocks, for the reconcile unit tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from handler.cgroups import LeftoverPartitions
from handler.domains import DomainCache
from handler.podnet import PodNetworks
from handler.reconcile import Reconciler
from handler.reconcile_deps import ReconcileOptions, ReconcilerDeps
from handler.vsock import NodeCIDs
from shared.kube import VMIS, Registry, StatusWriter, Store
from shared.model import VirtualMachineInstance
from shared.wire.domain import DomainEvent, DomainStatus, EventType
from tests.unit.handler.fakes import NODE, FakeApi, FakeLauncher, FakePool, FakeQueue

ACPI_INTERVAL = 3.0
MISSING_TIMEOUT = 30.0


class Rig:
    """One node's reconcile loop over FakeApi; `informer_sync()` plays the informer."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.wall = datetime(2026, 1, 1, tzinfo=UTC)
        self.api = FakeApi(wall=lambda: self.wall)
        self.store: Store[VirtualMachineInstance] = Store()
        self.queue = FakeQueue()
        self.pool = FakePool()
        self.changed: list[str] = []
        self.domains = DomainCache(on_change=self.changed.append)
        self.writer = StatusWriter(
            self.api, VMIS, model=VirtualMachineInstance, registry=Registry()
        )
        self.reconciler = self.fresh_reconciler()

    def fresh_reconciler(
        self,
        podnet: PodNetworks | None = None,
        partitions: LeftoverPartitions | None = None,
        vsock: NodeCIDs | None = None,
    ) -> Reconciler:
        """A reconciler with no memory (a restarted handler), sharing the fakes."""
        return Reconciler(
            ReconcilerDeps(
                store=self.store,
                domains=self.domains,
                launchers=self.pool,
                status=self.writer,
                get_vmi=self.api.get_vmi,
                queue=self.queue,
                clock=lambda: self.now,
                wall=lambda: self.wall,
                podnet=podnet,
                partitions=partitions,
                vsock=vsock,
            ),
            ReconcileOptions(
                node=NODE,
                pods_dir=Path("/pods"),
                acpi_interval=ACPI_INTERVAL,
                launcher_missing_timeout=MISSING_TIMEOUT,
            ),
        )

    def put(self, obj: dict[str, Any]) -> str:
        """Write a VMI as the controller would, and let the informer see it."""
        stored = self.api.put_vmi(obj)
        key = f"{stored['metadata']['namespace']}/{stored['metadata']['name']}"
        self.informer_sync()
        return key

    def informer_sync(self) -> None:
        for key in list(self.store):
            if key not in self.api.vmis:
                self.store.remove(key)
        for key in self.api.vmis:
            self.store.upsert(key, self.api.vmi(key))

    async def process(self, key: str) -> VirtualMachineInstance:
        await self.reconciler.process(key)
        return self.api.vmi(key)

    def launcher(self, key: str, **kwargs: Any) -> FakeLauncher:
        """The fake launcher of a VMI (created with `kwargs` on first use)."""
        uid = self.api.vmis[key]["metadata"]["uid"]
        return self.pool.launchers.setdefault(uid, FakeLauncher(**kwargs))

    def push(self, status: DomainStatus, reason: str = "Modified") -> None:
        """A domain event arriving on the notify socket."""
        self.domains.apply_event(DomainEvent(type=EventType.MODIFIED, domain=status, reason=reason))

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.wall += timedelta(seconds=seconds)
