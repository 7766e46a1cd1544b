"""The source side of a live migration, as one step of the VMI reconcile.

Who writes what in VMI status.migrationState (the controller wrote the identity fields
at PreparingTarget and sets abortRequested on cancel):

    target handler: targetNodeAddress (→ TargetReady), then, once the source reported
                    completion and its launcher runs the domain: targetNodeDomainDetected,
                    targetNodeDomainReadyTimestamp and status.nodeName (it owns the VMI then;
                    the controller moves the node label and activePods)
    source handler: startTimestamp (→ Running), completed / failed + failureReason,
                    endTimestamp, abortStatus

The source launcher runs the migration as a background job and reports it in its domain
status' `migration` map (pushed with domain events), matched to this migration by the
address it was given: the target's own address when both launchers share one host, or,
when the target published proxy ports (targetDirectMigrationNodePorts), the migration's
dir in the source pod where this handler's end of the proxy listens (`OutgoingMigrations`;
handler.migration_proxy). Both pods' dirs are named by the same UID (libvirt hands the
target the source's stream paths): a decentralized migration's is the receiving VMIM's
(migrationState.targetState.migrationUID), as the target handler names its own. That
end closes when the migration ends, or the VMI leaves.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from handler.commands import sync_error
from handler.domains import DomainRecord
from handler.errors import LauncherUnavailable, SyncError, SyncReason
from handler.launchers import LauncherPort, pod_on_node
from handler.migration_proxy import (
    SourceProxy,
    decode_ports,
    migration_dir,
    on_node,
)
from handler.migration_tls import ProxyConfig
from shared.clusterconfig import MigrationLimits
from shared.model import MigrationAbortStatus, MigrationState, VirtualMachineInstance
from shared.volumemigration import migrated_volumes
from shared.wire.errors import WireError
from shared.wire.launcher_api import Method
from shared.wire.migration import MigrateArgs, MigrationInfo, MigrationPhase

log = structlog.get_logger("handler.migration")


def source_state(vmi: VirtualMachineInstance, node: str) -> MigrationState | None:
    """The VMI's migrationState when this node is the source of an unfinished migration."""
    state = vmi.status.migration_state
    if state is None or state.source_node != node or vmi.status.node_name != node:
        return None
    return state


def handed_over(vmi: VirtualMachineInstance, node: str) -> bool:
    """This node was the source of a completed migration: the guest runs elsewhere now."""
    state = vmi.status.migration_state
    return bool(state is not None and state.completed and state.source_node == node)


GIB = 1024**3


def completion_timeout(vmi: VirtualMachineInstance, limits: MigrationLimits) -> int:
    """KubeVirt's completionTimeoutPerGiB times the guest's memory in GiB, counted as at
    least one GiB (a small guest under TCG still gets the per-GiB budget)."""
    memory = vmi.spec.domain.guest_memory_bytes() or GIB
    return max(1, round(limits.completion_timeout_per_gib * max(1.0, memory / GIB)))


def with_limits(
    todo: SourceStep, vmi: VirtualMachineInstance, limits: MigrationLimits
) -> SourceStep:
    """A migrate step carrying the bandwidth, timeouts and switches in force."""
    args = MigrateArgs.from_wire(todo.args or {})
    limited = dataclasses.replace(
        args,
        bandwidth_mib=limits.bandwidth_mib,
        timeout_seconds=completion_timeout(vmi, limits),
        progress_timeout_seconds=limits.progress_timeout,
        allow_auto_converge=limits.allow_auto_converge,
        allow_post_copy=limits.allow_post_copy,
        migrated_volumes=tuple(sorted(migrated_volumes(vmi))),
    )
    return dataclasses.replace(todo, args=limited.to_wire())


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceStep:
    """What one reconcile does for an outgoing migration."""

    call: Method | None = None
    args: Mapping[str, Any] | None = None
    state: MigrationState | None = None  # the migrationState to write, None: unchanged
    outcome: MigrationInfo | None = None  # the launcher's final report, when it just ended


def launcher_address(state: MigrationState) -> str | None:
    """The `address` the source launcher migrates to: the proxy's dir in its own pod when
    the target published proxy ports, else the target's own (one-host) address."""
    if state.target_direct_migration_node_ports and (uid := state.proxy_uid()):
        return str(migration_dir(uid))
    return state.target_node_address


def plan_source(state: MigrationState, record: DomainRecord | None, *, now: str) -> SourceStep:
    """The next step, from the VMI's migrationState and the launcher's migration report."""
    if state.completed or state.failed:
        return SourceStep()
    address = launcher_address(state) if state.target_node_address else None
    info = _info_for(record, address)
    if info is not None and info.phase.is_final():
        return SourceStep(state=_finished(state, info, now=now), outcome=info)
    if state.abort_requested:
        return _plan_abort(state, info, now=now)
    if address and info is None and not state.start_timestamp:
        args = MigrateArgs(address=address).to_wire()
        return SourceStep(
            call=Method.MIGRATE, args=args, state=dataclasses.replace(state, start_timestamp=now)
        )
    return SourceStep()


def _plan_abort(state: MigrationState, info: MigrationInfo | None, *, now: str) -> SourceStep:
    if info is None and not state.start_timestamp:  # never started: nothing to stop
        return SourceStep(state=_aborted(state, "aborted before it started", now=now))
    if info is None or not info.abort_requested:
        return SourceStep(call=Method.CANCEL_MIGRATION)
    return SourceStep()


def _info_for(record: DomainRecord | None, address: str | None) -> MigrationInfo | None:
    if record is None or not address:
        return None
    info = MigrationInfo.from_status(record.status.migration)
    return info if info is not None and info.target_address == address else None


def _finished(state: MigrationState, info: MigrationInfo, *, now: str) -> MigrationState:
    end = info.end_timestamp or now
    if info.phase is MigrationPhase.SUCCEEDED:
        return dataclasses.replace(state, completed=True, end_timestamp=end)
    if info.aborted or state.abort_requested:
        return _aborted(state, info.failure_reason or "aborted", now=end)
    reason = info.failure_reason or "migration failed"
    # The launcher's own abort (progressTimeout, completion timeout): KubeVirt's handler
    # reports it failed, abortStatus Succeeded, with the launcher's reason as it is.
    status = MigrationAbortStatus.SUCCEEDED if info.timed_out else None
    return dataclasses.replace(
        state, failed=True, failure_reason=reason, abort_status=status, end_timestamp=end
    )


def _aborted(state: MigrationState, reason: str, *, now: str) -> MigrationState:
    return dataclasses.replace(
        state,
        failed=True,
        failure_reason=f"Migration aborted: {reason}",
        abort_status=MigrationAbortStatus.SUCCEEDED,
        end_timestamp=now,
    )


async def run_source_step(launcher: LauncherPort, step: SourceStep) -> None:
    """Send the step's command; a failure to start becomes a SyncError (retried)."""
    if step.outcome is not None:
        out = step.outcome
        log.info(
            "migration_source_finished",
            phase=str(out.phase),
            elapsed_ms=out.elapsed_ms,
            downtime_ms=out.downtime_ms,
            data_total=out.data_total,
            data_processed=out.data_processed,
            failure=out.failure_reason,
        )
    if step.call is None:
        return
    try:
        await launcher.call(step.call, step.args)
    except (WireError, LauncherUnavailable) as exc:
        raise sync_error(step.call, exc) from exc
    log.info("migration_source_call", method=str(step.call))


class OutgoingMigrations:
    """The source side's steps, with this handler's end of the proxy when the target
    published one; at most one proxy per VMI, closed when its migration ends."""

    def __init__(
        self,
        proxy: ProxyConfig | None = None,
        *,
        limits: Callable[[VirtualMachineInstance], MigrationLimits] | None = None,
    ) -> None:
        self._proxy = proxy
        # The limits in force for a VMI (the KubeVirt CR's, or its MigrationPolicy's), read
        # when its migration starts; without: the proxy's bandwidth flag.
        default = MigrationLimits(bandwidth_mib=proxy.bandwidth_mib if proxy else 0)
        self._limits = limits or (lambda vmi: default)
        self._open: dict[str, SourceProxy] = {}

    async def step(
        self,
        vmi: VirtualMachineInstance,
        state: MigrationState,
        launcher: LauncherPort,
        record: DomainRecord | None,
        *,
        now: str,
        pods_dir: Path,
        node: str,
    ) -> MigrationState | None:
        """Plan and run the next step; the migrationState to write (None: unchanged)."""
        todo = plan_source(state, record, now=now)
        if todo.call is Method.MIGRATE:
            limits = self._limits(vmi)
            todo = with_limits(todo, vmi, limits)
            log.info(
                "migration_source_starting",
                vmi=vmi.key,
                policy=state.migration_policy_name,
                bandwidth_mib=limits.bandwidth_mib,
                timeout_seconds=(todo.args or {}).get("timeoutSeconds"),
                progress_timeout_seconds=limits.progress_timeout,
                auto_converge=limits.allow_auto_converge,
                post_copy=limits.allow_post_copy,
            )
        if todo.call is Method.MIGRATE and state.target_direct_migration_node_ports:
            todo = await self._through_proxy(
                vmi, state, todo, now=now, pods_dir=pods_dir, node=node
            )
        await run_source_step(launcher, todo)
        written = todo.state or state
        if written.completed or written.failed:
            self.release(vmi.uid)
        return todo.state

    async def _through_proxy(
        self,
        vmi: VirtualMachineInstance,
        state: MigrationState,
        todo: SourceStep,
        *,
        now: str,
        pods_dir: Path,
        node: str,
    ) -> SourceStep:
        pod_uid = pod_on_node(vmi.status.active_pods, node)
        uid = state.proxy_uid()
        if self._proxy is None or pod_uid is None or not uid:
            why = "no migration proxy configured" if pod_uid else "no source pod here"
            failed = dataclasses.replace(
                state, failed=True, failure_reason=f"cannot migrate: {why}", end_timestamp=now
            )
            return SourceStep(state=failed)
        self.release(vmi.uid)  # a retried start
        in_pod = migration_dir(uid)
        proxy = SourceProxy(
            self._proxy,
            migration_uid=uid,
            host=state.target_node_address or "",
            ports=decode_ports(state.target_direct_migration_node_ports),
            directory=on_node(pods_dir, pod_uid, in_pod),
        )
        self._open[vmi.uid] = proxy
        try:
            await proxy.open()
            xml = await proxy.domain_xml()
        except (OSError, ssl.SSLError, TimeoutError, ValueError) as exc:
            self.release(vmi.uid)
            raise SyncError(SyncReason.SYNC_FAILED, f"migration proxy: {exc}") from exc
        planned = MigrateArgs.from_wire(todo.args or {"address": str(in_pod)})
        args = dataclasses.replace(planned, address=str(in_pod), domain_xml=xml)
        return dataclasses.replace(todo, args=args.to_wire())

    def release(self, vmi_uid: str) -> None:
        """Close the VMI's proxy end, if open."""
        proxy = self._open.pop(vmi_uid, None)
        if proxy is not None:
            proxy.close()

    def close_all(self) -> None:
        for uid in list(self._open):
            self.release(uid)
