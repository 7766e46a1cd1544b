"""The VMI reconcile loop: drive each VMI's launcher toward what the VMI asks, then write
what happened into its status.

Shape (KubeVirt's): read the VMI from the informer cache and its domain from the domain
cache → act on the launcher (Sync while Scheduled, ACPI/Kill while stopping, Delete once
final) → always compute and write status, a failed step's `SyncError` included (it
becomes the Synchronized condition). The status writer diffs and skips no-op writes, so
a VMI reaches Running in one write and gets its agent condition in a second. A write
never lands on a VMI that became final meanwhile or was replaced (`Superseded`): the
controller fails VMIs whose launcher pod died too, and the first verdict stands.
"""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path

import structlog

from handler import commands, hotresources, linkstate, nichotplug, vsock
from handler.domains import DomainRecord
from handler.errors import Superseded, SyncError
from handler.guest import GuestFacts, refresh_unless_interrupted
from handler.launchers import (
    LauncherState,
    launcher_socket,
    pod_on_node,
)
from handler.migration_source import handed_over, source_state
from handler.reconcile_deps import Local, Pass, ReconcileOptions, ReconcilerDeps
from handler.reconcile_write import stopping, write
from handler.stopping import StopState, StopStep, deadline, plan
from shared.kube import EventType, KubeError, NotFound
from shared.kube.syncfailure import CLEAR_RETRY, SyncFailures
from shared.model import (
    VirtualMachineInstance,
    VMIPhase,
    format_time,
)
from shared.wire.domain import DomainState, DomainStatus
from shared.wire.launcher_api import Method

log = structlog.get_logger("handler.reconcile")

ACTIVE_PHASES = frozenset({VMIPhase.SCHEDULED, VMIPhase.RUNNING})


class Reconciler:
    """Reconciles the VMIs of one node; `process` is the work-queue worker function."""

    def __init__(self, deps: ReconcilerDeps, options: ReconcileOptions) -> None:
        self._d = deps
        self._o = options
        self._locals: dict[str, Local] = {}
        self._failures = deps.failures or SyncFailures(None, None)

    async def process(self, key: str) -> None:
        """Reconcile `key`; a failure is logged and retried with the key's backoff."""
        with structlog.contextvars.bound_contextvars(vmi=key):
            try:
                await self.reconcile(key)
            except SyncError as exc:
                log.warning("sync_failed", reason=str(exc.reason), error=exc.message)
                self._d.queue.add_rate_limited(key)
            except Superseded as exc:
                log.info("status_write_superseded", why=str(exc))
                self._d.queue.add_rate_limited(key)
            except NotFound:
                log.info("vmi_gone_during_reconcile")
            except KubeError as exc:
                log.warning("status_write_failed", error=str(exc))
                self._d.queue.add_rate_limited(key)
            except Exception as exc:  # task boundary: unforeseen, so shown on the VMI
                await self._failures.failed(key, exc)
                self._d.queue.add_rate_limited(key)
            else:
                self._d.queue.forget(key)
                if not await self._failures.succeeded(key):
                    self._d.queue.add_after(key, CLEAR_RETRY)

    async def reconcile(self, key: str) -> None:
        vmi = self._current(key)
        if vmi is None:
            self._forget(key)
            return
        local = self._local(key, vmi.uid)
        if vmi.is_final() or handed_over(vmi, self._o.node):
            await self._finish(vmi, local)  # migrated away: its launcher here is deleted
            return
        socket = self._socket_of(vmi, local)
        if vmi.status.phase_or_unset not in ACTIVE_PHASES or socket is None:
            return  # the controller's part (Pending, Scheduling) or no launcher pod here yet
        launcher = self._d.launchers.ensure(uid=vmi.uid, key=key, socket=socket)
        step = Pass(vmi=vmi, local=local, launcher=launcher)
        try:
            await self._drive(step)
        except SyncError as exc:
            step.error = exc
        written = await write(self._d, self._o, step)
        for delay in step.revisit:
            self._d.queue.add_after(key, delay)
        if written.is_final():
            await self._finish(written, local)
        if step.error is not None and step.error.requeue:
            raise step.error

    # ---- acting on the launcher ------------------------------------------------------

    async def _drive(self, step: Pass) -> None:
        record = self._d.domains.get(step.vmi.uid)
        if step.launcher.state is LauncherState.GONE and stopping(step.vmi, record):
            self._mark_missing(step.vmi)  # it stopped and exited before we saw the guest off
            return
        if step.launcher.state is not LauncherState.CONNECTED:
            self._watch_missing_launcher(step)
            return
        if stopping(step.vmi, record):
            await self._stop(step, record)
            return
        if step.vmi.status.phase is VMIPhase.SCHEDULED:
            await self._wire(step)
            vmi, step.vsock_cid = vsock.with_cid(self._d.vsock, step.vmi)  # CID in the status
            await self._reply(step, commands.sync(step.launcher, vmi.to_dict()))
        elif record is None:
            await self._fetch_domain(step)
        await self._fetch_guest_info(step)
        await self._migrate_out(step)
        await self._hotplug(step)
        if self._d.expansion is not None:
            await self._d.expansion.sync(step.vmi, step.launcher)
        await self._hot_resources(step)
        if (links := linkstate.wanted(step.vmi)) is not None:
            await linkstate.apply(step.launcher, links)
        if self._d.linkrefresh is not None:  # binding plugins' migration.method link-refresh
            await self._d.linkrefresh.apply(step.launcher, step.vmi)
        if nichotplug.wanted(step.vmi):
            step.nics = await nichotplug.apply(step.launcher, step.vmi)

    async def _wire(self, step: Pass) -> None:
        """The pod's network wired before the launcher defines the domain (once per pod)."""
        pod_uid = step.local.pod_uid
        if self._d.podnet is not None and pod_uid is not None:
            socket = launcher_socket(self._o.pods_dir, pod_uid)
            await self._d.podnet.ensure(step.vmi, pod_uid=pod_uid, socket=socket)

    async def _hotplug(self, step: Pass) -> None:
        """Hotplugged volumes of a Running VMI mounted and attached, removed ones detached."""
        hotplug, vmi, pod_uid = self._d.hotplug, step.vmi, step.local.pod_uid
        if hotplug is None or vmi.status.phase is not VMIPhase.RUNNING or pod_uid is None:
            return
        if not hotplug.wanted(vmi):
            return
        outcome = await hotplug.sync(vmi, step.launcher, pod_uid=pod_uid)
        step.volume_status = outcome.volume_status
        if outcome.revisit is not None:
            step.revisit.append(outcome.revisit)
        for name, why in outcome.forced:
            message = f"Volume {name} was unplugged without the guest's consent: {why}"
            self._d.recorder.event(vmi, EventType.WARNING, "HotplugDetachForced", message)

    async def _hot_resources(self, step: Pass) -> None:
        """A Running VMI's sockets / guest memory changed live: the launcher hot-plugs."""
        args = hotresources.wanted(step.vmi)
        if args is not None and step.vmi.status.phase is VMIPhase.RUNNING:
            step.resources = await hotresources.apply(step.launcher, args)

    async def _migrate_out(self, step: Pass) -> None:
        """This node is the source of a migration: start, cancel or conclude it."""
        state = source_state(step.vmi, self._o.node)
        if state is None:
            return
        now = format_time(self._d.wall())
        step.migration_state = await self._d.outgoing.step(
            step.vmi,
            state,
            step.launcher,
            self._d.domains.get(step.vmi.uid),
            now=now,
            pods_dir=self._o.pods_dir,
            node=self._o.node,
        )

    async def _reply(self, step: Pass, call: Awaitable[DomainStatus]) -> None:
        since = self._d.domains.generation(step.vmi.uid)
        status = await call
        self._d.domains.apply_reply(status, since=since)

    async def _fetch_domain(self, step: Pass) -> None:
        """Fill the cache after a restart; a launcher without a domain means it vanished."""
        try:
            await self._reply(step, commands.domain(step.launcher))
        except SyncError as exc:
            if not commands.is_domain_not_found(exc):
                raise
            self._mark_missing(step.vmi)

    async def _stop(self, step: Pass, record: DomainRecord | None) -> None:
        vmi, local, now = step.vmi, step.local, self._d.clock()
        if local.stop is None:
            local.stop = StopState(asked_at=now)
            log.info("vmi_stopping", deleting=vmi.metadata.is_deleting)
            if vmi.metadata.is_deleting:
                self._d.recorder.event(vmi, EventType.NORMAL, "Deleted", "Signaled Deletion")
            else:
                self._d.recorder.event(
                    vmi, EventType.NORMAL, "ShuttingDown", "Signaled Graceful Shutdown"
                )
        if record is None:
            await self._fetch_domain(step)
            record = self._d.domains.get(vmi.uid)
        if record is None or record.is_off:
            return
        ends_at = deadline(vmi, local.stop, now=now, wall=self._d.wall())
        todo = plan(local.stop, now=now, ends_at=ends_at, acpi_interval=self._o.acpi_interval)
        step.revisit.append(todo.revisit_in)
        if todo.step is StopStep.KILL:
            log.warning(
                "grace_period_expired",
                grace=vmi.spec.grace_period_seconds,
                overdue=round(-todo.remaining, 2),
            )
            local.stop.kills += 1
            await self._reply(step, commands.domain(step.launcher, Method.KILL))
        elif todo.step is StopStep.ACPI:
            local.stop.last_acpi = now
            log.info("acpi_shutdown_sent", remaining=round(todo.remaining, 1))
            await self._reply(step, commands.domain(step.launcher, Method.SHUTDOWN))

    async def _fetch_guest_info(self, step: Pass) -> None:
        record = self._d.domains.get(step.vmi.uid)
        local = step.local
        if record is None or record.is_off or not record.status.agent_connected:
            local.guest = None  # asked again when the agent comes back
            return
        if record.status.state is DomainState.PAUSED:
            step.guest = local.guest  # its agent cannot answer: the facts from before stand
            return  # (and the Paused write waits on no launcher call; Resumed asks again)
        local.guest = local.guest or GuestFacts()
        step.revisit.append(
            await refresh_unless_interrupted(
                local.guest,
                step.launcher,
                interrupt=self._d.domains.next_state_change(step.vmi.uid),
                now=self._d.clock(),
                retry=self._o.guest_info_retry,
                refresh_every=self._o.guest_interfaces_refresh,
            )
        )
        step.guest = local.guest

    def _mark_missing(self, vmi: VirtualMachineInstance) -> None:
        record = self._d.domains.get(vmi.uid)
        if record is None or not record.is_off:
            self._d.domains.mark_missing(uid=vmi.uid, namespace=vmi.namespace, name=vmi.name)

    def _watch_missing_launcher(self, step: Pass) -> None:
        """A Running VMI whose launcher never shows up is re-checked until it times out."""
        if (
            step.launcher.state is LauncherState.WAITING
            and step.vmi.status.phase is VMIPhase.RUNNING
        ):
            step.revisit.append(self._o.launcher_missing_timeout)

    async def _finish(self, vmi: VirtualMachineInstance, local: Local) -> None:
        """Once final: Delete on the launcher (it exits, its pod completes), then let go."""
        if local.launcher_deleted:
            return
        socket = self._socket_of(vmi, local)
        launcher = self._d.launchers.get(vmi.uid)
        if launcher is None and socket is not None and socket.exists():
            launcher = self._d.launchers.ensure(uid=vmi.uid, key=vmi.key, socket=socket)
        if launcher is None or launcher.state is LauncherState.GONE:
            self._release(vmi.uid, local)
            return
        if launcher.state is not LauncherState.CONNECTED:
            if socket is None or not socket.exists():
                self._release(vmi.uid, local)
            return  # the pool announces the connection; we come back then
        try:
            await commands.delete(launcher)
            log.info("launcher_deleted", phase=str(vmi.status.phase))
        except SyncError as exc:
            log.info("launcher_delete_failed", error=exc.message)
        self._release(vmi.uid, local)

    def _release(self, uid: str, local: Local) -> None:
        local.launcher_deleted = True
        if self._d.expansion is not None:
            self._d.expansion.release(uid)
        if self._d.hotplug is not None:
            self._d.hotplug.release(uid, local.pod_uid)
        self._d.outgoing.release(uid)
        self._d.launchers.release(uid)

    # ---- bookkeeping -----------------------------------------------------------------

    def _socket_of(self, vmi: VirtualMachineInstance, local: Local) -> Path | None:
        """The launcher socket of the VMI's pod here. A pod that activePods stops naming
        while the VMI still runs here is still its launcher: its death is ours to see."""
        pod_uid = pod_on_node(vmi.status.active_pods, self._o.node)
        if pod_uid is None and vmi.status.node_name == self._o.node:
            pod_uid = local.pod_uid
        local.pod_uid = pod_uid
        return None if pod_uid is None else launcher_socket(self._o.pods_dir, pod_uid)

    def _current(self, key: str) -> VirtualMachineInstance | None:
        """The cached VMI, or what we last wrote when the cache still shows its base."""
        vmi = self._d.store.get(key)
        local = self._locals.get(key)
        if vmi is None or local is None or local.written is None or local.uid != vmi.uid:
            return vmi
        base_rv, result = local.written
        return result if vmi.metadata.resource_version == base_rv else vmi

    def _local(self, key: str, uid: str) -> Local:
        local = self._locals.get(key)
        if local is None or local.uid != uid:
            if local is not None:
                self._drop(local)
            local = self._locals[key] = Local(uid=uid)
        return local

    def _forget(self, key: str) -> None:
        local = self._locals.pop(key, None)
        if local is not None:
            self._drop(local)
            log.info("vmi_forgotten")
        else:  # a launcher's event after the VMI was forgotten brought its key back
            self._d.domains.forget_key(key)

    def _drop(self, local: Local) -> None:
        if self._d.expansion is not None:
            self._d.expansion.release(local.uid)
        if self._d.hotplug is not None:
            self._d.hotplug.release(local.uid, local.pod_uid)
        self._d.outgoing.release(local.uid)
        self._d.launchers.release(local.uid)
        if self._d.vsock is not None:
            self._d.vsock.release(local.uid)
        self._d.domains.forget(local.uid)
        self._d.recorder.forget(local.uid)
        if self._d.partitions is not None:  # every launcher of the VMI has ended
            self._d.partitions.sweep(local.uid)

    def uids(self) -> dict[str, str]:
        """VMI key → uid of every VMI the handler holds state for (metrics, tests)."""
        return {key: local.uid for key, local in self._locals.items()}
