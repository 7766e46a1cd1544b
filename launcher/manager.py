"""The domain manager: the launcher's one domain, driven by commands and libvirt events.

Sync defines and starts the domain once (a VMI runs once; a stopped domain is never
restarted by a repeated Sync). State changes are pushed to the notifier as DomainEvents.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from launcher import devtags, domxml, vmstate
from launcher.credsync import CredentialSync, SyncSources
from launcher.devstats import DeviceNames, GuestInterface, device_names, guest_interfaces, named
from launcher.disks import DiskContext
from launcher.domxml import DomainPlan
from launcher.errors import DomainNotFound, InvalidSpec, LibvirtFailure
from launcher.freeze import Freezer
from launcher.passt import Passt
from launcher.plan import HostPaths, parse_vmi, plan_domain
from launcher.virtinfo import reason_name
from launcher.virtport import VirtPort
from launcher.virttypes import LifecycleEvent, watchdog_action
from shared.model import StartStrategy, VirtualMachineInstance, format_time, utc_now
from shared.wire.domain import DomainEvent, DomainState, DomainStatus, EventType
from shared.wire.errors import CommandFailed
from shared.wire.migration import MigrationInfo, MigrationPhase, MigrationRole
from shared.wire.stats import DomainStats, MigrationJobStats

log = structlog.get_logger("launcher.manager")

ACPI_RETRY_SECONDS = 2.0
OFF_STATES = frozenset({DomainState.SHUTOFF, DomainState.CRASHED})
GOING_OFF = OFF_STATES | {DomainState.SHUTDOWN}


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    namespace: str
    name: str
    uid: str

    @property
    def domain(self) -> str:
        return f"{self.namespace}_{self.name}"


@dataclass(slots=True)
class _Flags:
    started: bool = False
    defined: bool = False
    agent_connected: bool = False
    graceful_shutdown: bool = False
    migration: MigrationInfo | None = None
    watchdog: tuple[int, str] = (0, "")  # times expired, libvirt's last action
    deleted: asyncio.Event = field(default_factory=asyncio.Event)


class DomainManager:
    """Owns the domain of one VMI."""

    def __init__(
        self,
        *,
        virt: VirtPort,
        identity: Identity,
        disks: DiskContext,
        host: HostPaths,
        virt_type: str,
        publish: Callable[[DomainEvent], None],
    ) -> None:
        self._virt = virt
        self._id = identity
        self._disks = disks
        self._host = host
        self._virt_type = virt_type
        self._publish = publish
        self._flags = _Flags()
        self._passt = Passt()
        self._sync_lock = asyncio.Lock()
        self.vmi: VirtualMachineInstance | None = None
        self.xml = ""
        self.shared_disks: dict[str, str] = {}  # target dev → volume, on shared storage
        self.freezer = Freezer(virt, identity.domain, on_change=lambda: self._push("FSFreeze"))
        sources = SyncSources(
            vmi=lambda: self.vmi,
            connected=lambda: self._flags.agent_connected,
            secret_dir=disks.access_cred_dir,
        )
        self.credentials = CredentialSync(
            self.agent, sources, on_change=lambda: self._push("AccessCredentials")
        )

    @property
    def deleted(self) -> asyncio.Event:
        return self._flags.deleted

    @property
    def identity(self) -> Identity:
        return self._id

    def _parse(self, raw_vmi: Any) -> VirtualMachineInstance:
        vmi = parse_vmi(raw_vmi)
        if vmi.metadata.uid != self._id.uid or vmi.metadata.name != self._id.name:
            raise InvalidSpec(
                f"this launcher serves VMI {self._id.namespace}/{self._id.name} uid {self._id.uid}",
                {"fields": [{"path": "metadata.uid", "message": "does not match the launcher"}]},
            )
        return vmi

    async def prepare_target(self, raw_vmi: Any) -> str:
        """Become a migration target: disks made, the XML built, nothing started.

        The domain arrives by migration; from then on it is this launcher's own (a later
        Sync only reports), so the launcher is marked started here.
        """
        vmi = self._parse(raw_vmi)
        async with self._sync_lock:
            found = await self._virt.state(self._id.domain)
            if found is not None and found[0] not in (DomainState.SHUTOFF, DomainState.CRASHED):
                raise InvalidSpec("this launcher runs its domain; it cannot be a target")
            # A domain that left earlier left its overlay: the incoming one starts afresh.
            for stale in self._disks.work_dir.glob("*-overlay.qcow2"):
                stale.unlink()
            self.vmi = vmi
            incoming = dataclasses.replace(self._disks, incoming=True)
            plan = await plan_domain(vmi, ctx=incoming, host=self._host, virt_type=self._virt_type)
            self._built(plan)
            await self._passt.start(plan.passt)  # listening before the incoming QEMU connects
            self._flags.started = True
            prepared = MigrationInfo(role=MigrationRole.TARGET, phase=MigrationPhase.PREPARED)
            self.set_migration(prepared)
        return self.xml

    def _built(self, plan: DomainPlan) -> None:
        self.xml = domxml.build(plan)
        self.shared_disks = {d.target: d.alias for d in plan.disks if d.shared}

    def _push(self, what: str) -> None:
        """Push the domain's status (fsFrozen, migration, access credentials) to the
        handler, as for any domain event."""
        self._virt.events.put_nowait(LifecycleEvent(self._id.domain, what))

    def set_migration(self, info: MigrationInfo) -> None:
        """Record migration progress and push it to the handler with the domain's status."""
        self._flags.migration = info
        self._push("Migration")

    async def sync(self, raw_vmi: Any) -> DomainStatus:
        """Define and start the domain once; later calls only report its status."""
        vmi = self._parse(raw_vmi)
        async with self._sync_lock:
            self.vmi = vmi
            if not self._flags.started:
                await self._define_and_start(vmi)
        return await self.status()

    async def _define_and_start(self, vmi: VirtualMachineInstance) -> None:
        plan = await plan_domain(vmi, ctx=self._disks, host=self._host, virt_type=self._virt_type)
        self._built(plan)
        await self._passt.start(plan.passt)  # listening before QEMU connects
        await self._virt.define(self.xml)
        self._flags.defined = True
        if devtags.wanted(vmi):  # libvirt's addresses, in the config drive
            xml = await self._virt.domain_xml(self._id.domain)
            await devtags.publish(vmi, domain_xml=xml, work_dir=self._disks.work_dir)
        paused = vmi.spec.start_strategy == StartStrategy.PAUSED
        try:
            await self._virt.start(self._id.domain, paused=paused)
        except LibvirtFailure as e:  # QEMU reaches no passt: say how passt ended
            if gone := self._passt.exited():
                raise LibvirtFailure(f"{e}; {gone}") from e
            raise
        self._flags.started = True
        log.info("domain_started", paused=paused, virt_type=self._virt_type)

    async def status(self) -> DomainStatus:
        found = await self._virt.state(self._id.domain)
        if found is None:
            raise DomainNotFound(f"domain {self._id.domain} is not defined")
        state, reason = found
        if state in OFF_STATES:  # its agent went with it; a later run's announces itself
            self._flags.agent_connected = False
        self._adopt(state)
        return self._status(state, reason_name(state, reason))

    def _adopt(self, state: DomainState) -> None:
        """A target whose incoming domain runs: the migration is over, the domain ours."""
        info = self._flags.migration
        if info is None or info.role is not MigrationRole.TARGET or info.phase.is_final():
            return
        if state is DomainState.RUNNING:
            self._flags.defined = True
            self._flags.migration = dataclasses.replace(
                info, phase=MigrationPhase.SUCCEEDED, end_timestamp=format_time(utc_now())
            )
            if self.vmi is not None:  # the migrated TPM state is now the VM's (vmstate.py)
                vmstate.promote_migrated_state(
                    self.vmi, state_dir=self._host.vm_state, swtpm_storage=self._host.swtpm_storage
                )
            log.info("migrated_domain_adopted")

    def _status(self, state: DomainState, reason: str) -> DomainStatus:
        migration = self._flags.migration
        return DomainStatus(
            name=self._id.domain,
            namespace=self._id.namespace,
            vmi_name=self._id.name,
            vmi_uid=self._id.uid,
            state=state,
            reason=reason,
            agent_connected=self._flags.agent_connected and state not in OFF_STATES,
            graceful_shutdown=self._flags.graceful_shutdown,
            migration=migration.to_wire() if migration is not None else {},
            fs_frozen=self.freezer.frozen and state not in OFF_STATES,
            access_credential=self.credentials.result if state not in OFF_STATES else None,
            watchdog_fired=self._flags.watchdog[0],
            watchdog_action=self._flags.watchdog[1],
        )

    async def pause(self) -> DomainStatus:
        """Pause; a no-op on a paused domain, as unpause is on a running one (KubeVirt's)."""
        return await self._move_to(DomainState.PAUSED, self._virt.suspend)

    async def unpause(self) -> DomainStatus:
        return await self._move_to(DomainState.RUNNING, self._virt.resume)

    async def _move_to(
        self, target: DomainState, action: Callable[[str], Awaitable[None]]
    ) -> DomainStatus:
        if (await self.status()).state != target:
            try:
                await action(self._id.domain)
            except LibvirtFailure:  # it got there by itself meanwhile: that is success
                if (await self.status()).state != target:
                    raise
        return await self.status()

    async def shutdown(self) -> DomainStatus:
        """ACPI power button; a no-op on a domain that is already off."""
        current = await self.status()
        if current.state in OFF_STATES:
            return current
        await self._power_off(self._virt.shutdown)
        return await self.status()

    async def kill(self) -> DomainStatus:
        current = await self.status()
        if current.state not in OFF_STATES:
            await self._power_off(self._virt.destroy)
        return await self.status()

    async def _power_off(self, action: Callable[[str], Awaitable[None]]) -> None:
        """Shutdown or destroy. The guest may go off, or start shutting down, between our
        look and the call (the handler's kill racing our own SIGTERM stop, a guest
        powering off): libvirt then refuses with "domain is not running", which is
        success."""
        try:
            await action(self._id.domain)
        except (LibvirtFailure, DomainNotFound):
            found = await self._virt.state(self._id.domain)
            if found is not None and found[0] not in GOING_OFF:
                raise

    async def reset(self) -> DomainStatus:
        """Hard reset (KubeVirt's VMI reset): the guest restarts at once, no ACPI."""
        await self._virt.reset(self._id.domain)
        return await self.status()

    async def soft_reboot(self) -> DomainStatus:
        await self._virt.reboot(self._id.domain)
        return await self.status()

    async def delete(self) -> None:
        """Destroy if running, undefine, and let the daemon exit."""
        found = await self._virt.state(self._id.domain)
        if found is not None:
            if found[0] not in (DomainState.SHUTOFF, DomainState.CRASHED):
                await self._virt.destroy(self._id.domain)
            await self._virt.undefine(self._id.domain)
        await self._passt.stop()
        self._flags.deleted.set()

    async def stats(self) -> DomainStats:
        """libvirt's counters under the VMI's disk and interface names; user-network
        interfaces' from the guest agent; an outgoing migration's progress while it runs."""
        raw = await self._virt.stats(self._id.domain)
        names = await self.device_names()
        guest = await self.guest_interfaces() if names.user_nics else ()
        stats = named(raw, names, guest)
        info = self._flags.migration
        if (
            info is not None
            and info.role is MigrationRole.SOURCE
            and info.phase is MigrationPhase.RUNNING
        ):
            job = await self._virt.job_stats(self._id.domain)
            stats = dataclasses.replace(
                stats,
                migration=MigrationJobStats(
                    data_total=job.data_total or 0,
                    data_processed=job.data_processed or 0,
                    data_remaining=job.data_remaining or 0,
                    dirty_rate_bps=job.memory_dirty_rate or 0,
                    memory_bps=job.memory_bps or 0,
                ),
            )
        return stats

    async def device_names(self) -> DeviceNames:
        """libvirt's device names → the VMI's, from the running definition."""
        return device_names(await self._virt.domain_xml(self._id.domain))

    async def guest_interfaces(self) -> tuple[GuestInterface, ...]:
        """The guest agent's interfaces (none while no agent is connected)."""
        if not self._flags.agent_connected:
            return ()
        try:
            return guest_interfaces(await self.agent("guest-network-get-interfaces"))
        except CommandFailed as exc:
            log.info("guest_interfaces_unavailable", error=str(exc))
            return ()

    async def agent(self, command: str, arguments: Mapping[str, Any] | None = None) -> Any:
        return await self._virt.agent_command(self._id.domain, command, arguments=arguments)

    async def graceful_stop(self, *, grace: float, clock: Callable[[], float]) -> None:
        """ACPI shutdown, re-sent every 2 s (a booting guest misses it), then destroy.

        A guest already shutting down needs no button and a paused one cannot hear it
        (libvirt refuses both): those are only waited for, then destroyed at grace end.
        """
        self._flags.graceful_shutdown = True
        deadline = clock() + grace
        while (found := await self._virt.state(self._id.domain)) is not None:
            if found[0] in OFF_STATES:
                return
            remaining = deadline - clock()
            if remaining <= 0:
                log.warning("grace_period_expired", grace=grace)
                await self._power_off(self._virt.destroy)
                return
            if found[0] not in (DomainState.SHUTDOWN, DomainState.PAUSED):
                await self._power_off(self._virt.shutdown)
                log.info("acpi_shutdown_sent", remaining=round(remaining, 1))
            await self._wait_off(min(ACPI_RETRY_SECONDS, remaining))

    async def _wait_off(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):
                while True:
                    found = await self._virt.state(self._id.domain)
                    if found is None or found[0] in (DomainState.SHUTOFF, DomainState.CRASHED):
                        return
                    await asyncio.sleep(0.1)
        except TimeoutError:
            return

    async def watch_events(self) -> None:
        """Turn libvirt events into DomainEvents for the handler, forever."""
        while True:
            event = await self._virt.events.get()
            if event.domain != self._id.domain:
                continue
            try:
                self._publish(await self._translate(event))
            except Exception:  # task boundary: one bad event must not stop the stream
                log.exception("domain_event_failed", libvirt_event=event.event)

    async def _translate(self, event: LifecycleEvent) -> DomainEvent:
        if event.agent_connected is not None:
            self._flags.agent_connected = event.agent_connected
        if event.event == "Watchdog":
            self._flags.watchdog = (self._flags.watchdog[0] + 1, watchdog_action(event.detail))
        if event.event == "Undefined":
            status = self._status(DomainState.SHUTOFF, "Undefined")
            return DomainEvent(type=EventType.DELETED, domain=status, reason=event.event)
        try:
            status = await self.status()
        except DomainNotFound:
            status = self._status(DomainState.NO_STATE, "Unknown")
        kind = EventType.ADDED if event.event == "Defined" else EventType.MODIFIED
        log.info(
            "domain_event_seen",
            libvirt_event=event.event,
            state=str(status.state),
            reason=status.reason,
        )
        return DomainEvent(type=kind, domain=status, reason=event.event)
