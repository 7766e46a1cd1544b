"""The target side of a live migration: prepare the target launcher, then take the VMI over.

The handler's VMI informer selects on `kubevirt.io/nodeName`, which names the source node
until the migration ends, so the target learns of its migrations from the VMIMs (the
controller mirrors the VMI's migrationState into each VMIM's status, so every change of
the VMI's migrationState reaches the VMIM watch too) and reads the VMI itself (a GET).

Per migration whose migrationState names this node as the target:
  1. once the target pod's `launcher-sock` exists: `prepare_migration_target` with the
     VMI, then write migrationState.targetNodeAddress (the controller → TargetReady, and
     the source handler starts the migration);
  2. once the source reported `completed` and the target launcher's domain runs: write
     targetNodeDomainDetected, targetNodeDomainReadyTimestamp and status.nodeName = this
     node. The controller then moves the node label and activePods, and this node's VMI
     informer picks the VMI up like any other.
A failure to prepare is written as failed=true with the reason (the controller fails the
VMIM and deletes the target pod; the guest never left the source).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import structlog

from handler.launchers import launcher_socket, pod_on_node
from shared.kube import Informer, KubeError, StatusWriter, WorkQueue
from shared.model import (
    Clock,
    MigrationPhase,
    MigrationState,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    format_time,
)
from shared.wire.client import RpcClient
from shared.wire.domain import DomainState, DomainStatus
from shared.wire.errors import WireError
from shared.wire.launcher_api import TIERS, Method, SyncArgs
from shared.wire.migration import PrepareTargetResult

log = structlog.get_logger("handler.migration_target")

GetVMI = Callable[[str, str], Awaitable[VirtualMachineInstance]]
Refresh = Callable[[], Awaitable[VirtualMachineInstance]]
RETRY = 0.5


async def launcher_call(socket: Path, method: Method, args: Mapping[str, Any] | None = None) -> Any:
    """One call on a short-lived connection (the pool serves this node's own VMIs)."""
    async with RpcClient.connect(socket) as client:
        return await client.call(str(method), args or {}, tier=TIERS[method])


class MigrationTargets:
    """Works the VMIMs whose migration lands on this node."""

    def __init__(
        self,
        *,
        node: str,
        pods_dir: Path,
        informer: Informer[VirtualMachineInstanceMigration],
        queue: WorkQueue,
        get_vmi: GetVMI,
        writer: StatusWriter[VirtualMachineInstance],
        wall: Clock,
    ) -> None:
        self._node = node
        self._pods_dir = pods_dir
        self._informer = informer
        self._queue = queue
        self._get_vmi = get_vmi
        self._writer = writer
        self._wall = wall

    async def process(self, key: str) -> None:
        """Work one VMIM; failures are logged and retried with the key's backoff."""
        with structlog.contextvars.bound_contextvars(vmim=key):
            try:
                again = await self._reconcile(key)
            except (KubeError, WireError) as exc:
                log.warning("migration_target_failed", error=str(exc))
                self._queue.add_rate_limited(key)
                return
            self._queue.forget(key)
            if again:
                self._queue.add_after(key, RETRY)

    async def _reconcile(self, key: str) -> bool:
        """True when the VMIM must be looked at again soon (waiting for a file or a state)."""
        found = await self._ours(key)
        if found is None:
            return False
        vmi, state = found
        pod_uid = pod_on_node(vmi.status.active_pods, self._node)
        socket = launcher_socket(self._pods_dir, pod_uid) if pod_uid else None
        if socket is None or not socket.exists():
            return True
        if not state.target_node_address:
            await self._prepare(vmi, state, socket)
            return False
        if state.completed:
            return await self._take_over(vmi, state, socket)
        return False

    async def _ours(self, key: str) -> tuple[VirtualMachineInstance, MigrationState] | None:
        """The VMI and its migrationState when an unfinished migration lands here."""
        m = self._informer.store.get(key)
        if m is None or m.status.phase_or_unset == MigrationPhase.FAILED:
            return None
        mirrored = m.status.migration_state
        if mirrored is None or mirrored.target_node != self._node:
            return None
        namespace, _, name = m.vmi_key.partition("/")
        vmi = await self._get_vmi(namespace, name)
        state = vmi.status.migration_state
        if state is None or state.migration_uid != m.uid or state.target_node != self._node:
            return None
        if state.failed or state.abort_requested or vmi.status.node_name == self._node:
            return None
        return vmi, state

    async def _prepare(
        self, vmi: VirtualMachineInstance, state: MigrationState, socket: Path
    ) -> None:
        args = SyncArgs(vmi=vmi.to_dict()).to_wire()
        try:
            raw = await launcher_call(socket, Method.PREPARE_MIGRATION_TARGET, args)
            result = PrepareTargetResult.from_wire(raw)
        except WireError as exc:
            log.warning("migration_target_prepare_failed", error=str(exc))
            await self._record_prepare_failure(vmi, state, f"preparing the target failed: {exc}")
            return
        log.info("migration_target_prepared", address=result.address)
        await self._write(vmi, dataclasses.replace(state, target_node_address=result.address))

    async def _take_over(
        self, vmi: VirtualMachineInstance, state: MigrationState, socket: Path
    ) -> bool:
        status = DomainStatus.from_wire(await launcher_call(socket, Method.GET_DOMAIN))
        if status.state is not DomainState.RUNNING:
            return True
        now = format_time(self._wall())
        state = dataclasses.replace(
            state, target_node_domain_detected=True, target_node_domain_ready_timestamp=now
        )
        new = dataclasses.replace(
            vmi, status=dataclasses.replace(vmi.status, node_name=self._node, migration_state=state)
        )
        await self._writer.write_status(vmi, new, refresh=self._refresh(vmi))
        log.info("migration_target_took_over", vmi=vmi.key)
        return False

    async def _record_prepare_failure(
        self, vmi: VirtualMachineInstance, state: MigrationState, reason: str
    ) -> None:
        """Fail the migration, unless it was cancelled or settled meanwhile: a cancelled
        migration's target pod goes away under a running prepare, and the abort the source
        side recorded must not be overwritten by this (stale) failure."""
        fresh = await self._get_vmi(vmi.namespace, vmi.name)
        current = fresh.status.migration_state
        if current is None or current.migration_uid != state.migration_uid:
            return
        if current.failed or current.completed or current.abort_requested:
            log.info("migration_target_prepare_failure_superseded", failed=current.failed)
            return
        now = format_time(self._wall())
        failed = dataclasses.replace(current, failed=True, failure_reason=reason, end_timestamp=now)
        await self._write(fresh, failed)

    async def _write(self, vmi: VirtualMachineInstance, state: MigrationState) -> None:
        status = dataclasses.replace(vmi.status, migration_state=state)
        new = dataclasses.replace(vmi, status=status)
        await self._writer.write_status(vmi, new, refresh=self._refresh(vmi))

    def _refresh(self, vmi: VirtualMachineInstance) -> Refresh:
        async def refresh() -> VirtualMachineInstance:
            return await self._get_vmi(vmi.namespace, vmi.name)

        return refresh
