"""The launcher's only door to libvirt: one connection, typed errors, calls off the loop.

libvirtaio dispatches libvirt's events on the asyncio loop; callbacks only enqueue.
Every blocking libvirt call runs in a worker thread under a timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import libvirt
import libvirt_qemu
import libvirtaio
import structlog

from launcher.domstats import parse_stats
from launcher.errors import AgentNotConnected, DomainNotFound, LibvirtFailure, StartupError
from launcher.virtinfo import job_stats, opt
from launcher.virttypes import BackupJob, JobStats, LifecycleEvent, MigrationRequest
from shared.wire.domain import DomainState
from shared.wire.stats import DomainStats

log = structlog.get_logger("launcher.virt")
T = TypeVar("T")

_STATES = {
    libvirt.VIR_DOMAIN_NOSTATE: DomainState.NO_STATE,
    libvirt.VIR_DOMAIN_RUNNING: DomainState.RUNNING,
    libvirt.VIR_DOMAIN_BLOCKED: DomainState.BLOCKED,
    libvirt.VIR_DOMAIN_PAUSED: DomainState.PAUSED,
    libvirt.VIR_DOMAIN_SHUTDOWN: DomainState.SHUTDOWN,
    libvirt.VIR_DOMAIN_SHUTOFF: DomainState.SHUTOFF,
    libvirt.VIR_DOMAIN_CRASHED: DomainState.CRASHED,
    libvirt.VIR_DOMAIN_PMSUSPENDED: DomainState.PM_SUSPENDED,
}
_ACTIVE_JOBS = (libvirt.VIR_DOMAIN_JOB_BOUNDED, libvirt.VIR_DOMAIN_JOB_UNBOUNDED)
_AGENT_ERRORS = {
    libvirt.VIR_ERR_AGENT_UNRESPONSIVE,
    libvirt.VIR_ERR_AGENT_UNSYNCED,
    getattr(libvirt, "VIR_ERR_AGENT_COMMAND_TIMEOUT", -1),
}


def register_event_loop() -> None:
    """Make libvirt dispatch events on the running asyncio loop (once per process)."""
    if libvirtaio.getCurrentImpl() is None:
        libvirtaio.virEventRegisterAsyncIOImpl(loop=asyncio.get_running_loop())


class Virt:
    """A libvirt connection to the launcher's private daemon."""

    def __init__(self, conn: Any, *, call_timeout: float) -> None:
        self._conn = conn
        self._timeout = call_timeout
        self.events: asyncio.Queue[LifecycleEvent] = asyncio.Queue()
        self._callbacks: list[int] = []

    @classmethod
    async def open(cls, uri: str, *, call_timeout: float = 30.0) -> Virt:
        register_event_loop()
        # Errors reach callers as typed exceptions; libvirt's default handler would also
        # print each one to stderr.
        libvirt.registerErrorHandler(_ignore_error, None)
        try:
            async with asyncio.timeout(call_timeout):
                conn = await asyncio.to_thread(libvirt.open, uri)
        except (libvirt.libvirtError, TimeoutError) as exc:
            raise StartupError(f"cannot connect to libvirt at {uri}: {exc}") from exc
        virt = cls(conn, call_timeout=call_timeout)
        virt._subscribe()
        return virt

    def _subscribe(self) -> None:
        def lifecycle(_c: Any, dom: Any, event: int, detail: int, _o: Any) -> None:
            self.events.put_nowait(LifecycleEvent(dom.name(), _event_name(event), detail))

        def agent(_c: Any, dom: Any, state: int, _reason: int, _o: Any) -> None:
            connected = state == libvirt.VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_CONNECTED
            self.events.put_nowait(LifecycleEvent(dom.name(), "Agent", 0, connected))

        def watchdog(_c: Any, dom: Any, action: int, _o: Any) -> None:
            self.events.put_nowait(LifecycleEvent(dom.name(), "Watchdog", action))

        for event_id, cb in (
            (libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, lifecycle),
            (libvirt.VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE, agent),
            (libvirt.VIR_DOMAIN_EVENT_ID_WATCHDOG, watchdog),
        ):
            self._callbacks.append(self._conn.domainEventRegisterAny(None, event_id, cb, None))

    async def close(self) -> None:
        for cb_id in self._callbacks:
            # The daemon may already be gone; then there is nothing to deregister from.
            with contextlib.suppress(libvirt.libvirtError):
                self._conn.domainEventDeregisterAny(cb_id)
        self._callbacks.clear()
        await self._call(self._conn.close)

    async def _call(self, fn: Callable[..., T], *args: Any, timeout: float | None = None) -> T:
        try:
            async with asyncio.timeout(timeout or self._timeout):
                return await asyncio.to_thread(fn, *args)
        except TimeoutError:
            raise LibvirtFailure(f"libvirt call {fn.__name__} timed out") from None
        except libvirt.libvirtError as exc:
            raise _typed(exc) from exc

    async def warm_up(self) -> None:
        """Make the daemon probe QEMU now, so the first Sync does not pay for it."""
        await self._call(self._conn.getCapabilities)

    async def domain_capabilities(self, virt_type: str) -> str:
        """libvirt's domcapabilities for `virt_type` (kvm or qemu): CPU models and host-model."""
        return await self._call(self._conn.getDomainCapabilities, None, None, None, virt_type)

    async def expand_cpu(self, cpu_xml: str, virt_type: str) -> str:
        """A CPU definition with every feature of its model spelled out (hypervisor baseline)."""
        expand = libvirt.VIR_CONNECT_BASELINE_CPU_EXPAND_FEATURES
        args = (None, None, None, virt_type, [cpu_xml], expand)
        return await self._call(self._conn.baselineHypervisorCPU, *args)

    async def _domain(self, name: str) -> Any:
        return await self._call(self._conn.lookupByName, name)

    async def _on(self, name: str, method: str, *args: Any) -> Any:
        """Call virDomain `method` of the domain `name` (looked up first) in the thread."""
        return await self._call(getattr(await self._domain(name), method), *args)

    async def define(self, xml: str) -> None:
        await self._call(self._conn.defineXML, xml)

    async def state(self, name: str) -> tuple[DomainState, int] | None:
        """The domain's state and reason code, or None when it is not defined."""
        try:
            dom = await self._domain(name)
            state, reason = await self._call(dom.state)
        except DomainNotFound:
            return None
        return _STATES.get(state, DomainState.NO_STATE), reason

    async def start(self, name: str, *, paused: bool) -> None:
        dom = await self._domain(name)
        flags = libvirt.VIR_DOMAIN_START_PAUSED if paused else 0
        await self._call(dom.createWithFlags, flags)

    async def suspend(self, name: str) -> None:
        await self._on(name, "suspend")

    async def resume(self, name: str) -> None:
        await self._on(name, "resume")

    async def shutdown(self, name: str) -> None:
        """Ask the guest to power off through ACPI."""
        await self._on(name, "shutdownFlags", libvirt.VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN)

    async def reboot(self, name: str) -> None:
        await self._on(name, "reboot", libvirt.VIR_DOMAIN_REBOOT_ACPI_POWER_BTN)

    async def destroy(self, name: str) -> None:
        await self._on(name, "destroy")

    async def undefine(self, name: str) -> None:
        """Undefine, keeping the NVRAM file and a persistent TPM's state: a persistent
        VM's are in its state claim (launcher/vmstate.py); anything else goes with the
        pod's private dir."""
        flags = libvirt.VIR_DOMAIN_UNDEFINE_KEEP_NVRAM | libvirt.VIR_DOMAIN_UNDEFINE_KEEP_TPM
        await self._on(name, "undefineFlags", flags)

    async def xml(self, name: str) -> str:
        return await self.domain_xml(name)

    async def attach_device(self, name: str, xml: str) -> None:
        """Hot-plug a device into the running domain (live only: a VMI runs once)."""
        await self._on(name, "attachDeviceFlags", xml, libvirt.VIR_DOMAIN_AFFECT_LIVE)

    async def detach_device(self, name: str, xml: str) -> None:
        """Ask for a device's removal; libvirt returns once the guest was asked (a guest
        may take longer, or ignore it: the caller checks the live XML)."""
        await self._on(name, "detachDeviceFlags", xml, libvirt.VIR_DOMAIN_AFFECT_LIVE)

    async def core_dump(self, name: str, path: str, *, timeout: float) -> None:
        """A memory-only dump of the domain into the file `path` (raw format: an ELF core
        of the guest's memory, KubeVirt's), the guest paused while it is written."""
        dom = await self._domain(name)
        fmt, flags = libvirt.VIR_DOMAIN_CORE_DUMP_FORMAT_RAW, libvirt.VIR_DUMP_MEMORY_ONLY
        await self._call(dom.coreDumpWithFormat, path, fmt, flags, timeout=timeout)

    async def block_capacity(self, name: str, target: str) -> int:
        """The size of disk `target` (vda …) as the guest sees it, in bytes."""
        dom = await self._domain(name)
        info: list[int] = await self._call(dom.blockInfo, target, 0)
        return int(info[0])

    async def block_resize(self, name: str, target: str, size: int) -> None:
        """Grow disk `target` under the running guest to `size` bytes (QEMU's
        block_resize: the guest is told of the new capacity)."""
        dom = await self._domain(name)
        await self._call(dom.blockResize, target, size, libvirt.VIR_DOMAIN_BLOCK_RESIZE_BYTES)

    async def set_vcpus(self, name: str, count: int) -> None:
        """Hot-plug (or unplug) vCPUs of the running domain up to its maximum (live only)."""
        dom = await self._domain(name)
        await self._call(dom.setVcpusFlags, count, libvirt.VIR_DOMAIN_AFFECT_LIVE)

    async def update_device(self, name: str, xml: str) -> None:
        """Change a device of the running domain in place (a virtio-mem's requested size)."""
        dom = await self._domain(name)
        await self._call(dom.updateDeviceFlags, xml, libvirt.VIR_DOMAIN_AFFECT_LIVE)

    async def migratable_xml(self, name: str) -> str:
        """The live definition, stripped of what must not travel (libvirt's MIGRATABLE)."""
        xml: str = await self._on(name, "XMLDesc", libvirt.VIR_DOMAIN_XML_MIGRATABLE)
        return xml

    async def migrate(self, name: str, request: MigrationRequest) -> None:
        """Peer-to-peer live migration to another daemon; returns once it has finished."""
        dom = await self._domain(name)
        flags = libvirt.VIR_MIGRATE_LIVE | libvirt.VIR_MIGRATE_PEER2PEER
        flags |= libvirt.VIR_MIGRATE_PERSIST_DEST
        params: dict[str, Any] = {
            libvirt.VIR_MIGRATE_PARAM_URI: request.migration_uri,
            libvirt.VIR_MIGRATE_PARAM_DEST_XML: request.dest_xml,
            libvirt.VIR_MIGRATE_PARAM_PERSIST_XML: request.persist_xml or request.dest_xml,
        }
        if request.dest_name:
            params[libvirt.VIR_MIGRATE_PARAM_DEST_NAME] = request.dest_name
        if request.bandwidth_mib:
            params[libvirt.VIR_MIGRATE_PARAM_BANDWIDTH] = request.bandwidth_mib
        if request.auto_converge:
            flags |= libvirt.VIR_MIGRATE_AUTO_CONVERGE
        if request.post_copy:
            flags |= libvirt.VIR_MIGRATE_POSTCOPY
        if request.copy_disks:
            # Only the top layer (the writable overlay) travels; its backing image is shared.
            flags |= libvirt.VIR_MIGRATE_NON_SHARED_INC
            params[libvirt.VIR_MIGRATE_PARAM_MIGRATE_DISKS] = list(request.copy_disks)
            if request.disks_uri:
                params[libvirt.VIR_MIGRATE_PARAM_DISKS_URI] = request.disks_uri
        if request.shared_disks:
            # libvirt knows shared storage only by filesystem type (NFS, GFS2, Ceph, ...)
            # and calls any other disk left in place unsafe. Here the claim's ReadWriteMany
            # access mode vouches for it (the handler's LiveMigratable); the disks use
            # cache=none, the coherency libvirt's check is about (docs/migration.md).
            flags |= libvirt.VIR_MIGRATE_UNSAFE
        if request.max_downtime_ms is not None:
            await self._call(dom.migrateSetMaxDowntime, request.max_downtime_ms, 0)
        uri, timeout = request.dest_uri, request.timeout
        await self._call(dom.migrateToURI3, uri, params, flags, timeout=timeout)

    async def set_max_downtime(self, name: str, milliseconds: int) -> None:
        """The pause QEMU may take at the switch-over (also while a migration runs)."""
        await self._on(name, "migrateSetMaxDowntime", milliseconds, 0)

    async def abort_job(self, name: str) -> None:
        await self._on(name, "abortJob")

    async def job_stats(self, name: str, *, completed: bool = False) -> JobStats:
        """Progress of the running job, or the last completed one's figures."""
        dom = await self._domain(name)
        flags = libvirt.VIR_DOMAIN_JOB_STATS_COMPLETED if completed else 0
        raw: dict[str, Any] = await self._call(dom.jobStats, flags)
        return job_stats(raw)

    async def backup_begin(self, name: str, backup_xml: str, checkpoint_xml: str) -> None:
        """Start a push-mode backup job with its checkpoint (virDomainBackupBegin)."""
        await self._on(name, "backupBegin", backup_xml, checkpoint_xml or None, 0)

    async def checkpoints(self, name: str) -> list[str]:
        """The names of the domain's checkpoints libvirt knows (this libvirtd's)."""
        found = await self._on(name, "listAllCheckpoints", 0)
        return [str(c.getName()) for c in found]

    async def delete_checkpoint(self, name: str, checkpoint: str) -> None:
        """Delete a checkpoint and its bitmaps (merged into its parent's, if any)."""
        cp = await self._on(name, "checkpointLookupByName", checkpoint, 0)
        await self._call(cp.delete, 0)

    async def backup_job(self, name: str) -> BackupJob:
        """The running backup job's progress, or how the last backup job ended."""
        dom = await self._domain(name)
        raw: dict[str, Any] = await self._call(dom.jobStats, 0)
        backup = raw.get("operation") == libvirt.VIR_DOMAIN_JOB_OPERATION_BACKUP
        if backup and raw.get("type") in _ACTIVE_JOBS:
            total, done = opt(raw, "disk_total"), opt(raw, "disk_processed")
            return BackupJob(running=True, data_total=total, data_processed=done)
        keep = libvirt.VIR_DOMAIN_JOB_STATS_COMPLETED | libvirt.VIR_DOMAIN_JOB_STATS_KEEP_COMPLETED
        last: dict[str, Any] = await self._call(dom.jobStats, keep)
        if last.get("operation") != libvirt.VIR_DOMAIN_JOB_OPERATION_BACKUP:
            return BackupJob()
        ok = last.get("type") == libvirt.VIR_DOMAIN_JOB_COMPLETED
        return BackupJob(
            completed=ok, error="" if ok else str(last.get("errmsg") or "the backup job failed"),
            data_total=opt(last, "disk_total"), data_processed=opt(last, "disk_processed"),
        )  # fmt: skip

    async def fs_freeze(self, name: str) -> int:
        """Freeze the guest's filesystems through its agent; how many were frozen."""
        frozen: int = await self._on(name, "fsFreeze", None, 0)
        return frozen

    async def fs_thaw(self, name: str) -> int:
        thawed: int = await self._on(name, "fsThaw", None, 0)
        return thawed

    async def reset(self, name: str) -> None:
        """A hard reset, as the reset button (no guest cooperation)."""
        await self._on(name, "reset", 0)

    async def domain_xml(self, name: str) -> str:
        """The running definition (live device names, aliases, generated MACs)."""
        xml: str = await self._on(name, "XMLDesc", 0)
        return xml

    async def stats(self, name: str) -> DomainStats:
        dom = await self._domain(name)
        result = await self._call(self._conn.domainListGetStats, [dom], 0, 0)
        return parse_stats(result[0][1] if result else {})

    async def monitor_command(self, name: str, command: str) -> str:
        """A QEMU human-monitor command (what QMP lacks, e.g. slirp's hostfwd_add); its
        output, which is empty on success for most commands."""
        dom = await self._domain(name)
        flags = libvirt_qemu.VIR_DOMAIN_QEMU_MONITOR_COMMAND_HMP
        out: str = await self._call(libvirt_qemu.qemuMonitorCommand, dom, command, flags)
        return out

    async def agent_command(
        self,
        name: str,
        command: str,
        *,
        timeout: int = 5,
        arguments: Mapping[str, Any] | None = None,
    ) -> Any:
        """Run a guest-agent command; AgentNotConnected when no agent answers."""
        dom = await self._domain(name)
        request: dict[str, Any] = {"execute": command}
        if arguments is not None:
            request["arguments"] = dict(arguments)
        payload = json.dumps(request)
        try:
            raw = await self._call(
                libvirt_qemu.qemuAgentCommand, dom, payload, timeout, 0, timeout=timeout + 5
            )
        except LibvirtFailure as exc:
            if "agent" in exc.message.lower():
                raise AgentNotConnected(f"guest agent not connected: {exc.message}") from exc
            raise
        return json.loads(raw).get("return")


def _ignore_error(_ctx: Any, _err: Any) -> None:
    return None


def _event_name(event: int) -> str:
    names = {
        libvirt.VIR_DOMAIN_EVENT_DEFINED: "Defined",
        libvirt.VIR_DOMAIN_EVENT_UNDEFINED: "Undefined",
        libvirt.VIR_DOMAIN_EVENT_STARTED: "Started",
        libvirt.VIR_DOMAIN_EVENT_SUSPENDED: "Suspended",
        libvirt.VIR_DOMAIN_EVENT_RESUMED: "Resumed",
        libvirt.VIR_DOMAIN_EVENT_STOPPED: "Stopped",
        libvirt.VIR_DOMAIN_EVENT_SHUTDOWN: "Shutdown",
        libvirt.VIR_DOMAIN_EVENT_PMSUSPENDED: "PMSuspended",
        libvirt.VIR_DOMAIN_EVENT_CRASHED: "Crashed",
    }
    return names.get(event, f"Event{event}")


def _typed(exc: Any) -> Exception:
    code = exc.get_error_code()
    message = exc.get_error_message() or str(exc)
    if code == libvirt.VIR_ERR_NO_DOMAIN:
        return DomainNotFound(message)
    if code in _AGENT_ERRORS:
        return AgentNotConnected(f"guest agent not connected: {message}")
    return LibvirtFailure(message, {"libvirtCode": code})
