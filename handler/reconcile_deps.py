"""What the VMI reconcile loop (reconcile.py) is built from, its dependencies and
options, and what it keeps about each VMI: between passes (`Local`, lost on restart) and
within one pass (`Pass`)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from handler import hotresources
from handler.cgroups import LeftoverPartitions
from handler.domains import DomainCache
from handler.errors import SyncError
from handler.expand import DiskExpansion
from handler.guest import GuestFacts
from handler.hotplug import HotplugVolumes
from handler.launchers import LauncherPort, PoolPort
from handler.linkrefresh import LinkRefresh
from handler.migration_source import OutgoingMigrations
from handler.podnet import PodNetworks
from handler.stopping import StopState
from handler.vsock import NodeCIDs
from shared.kube import DiscardRecorder, Recorder
from shared.kube.syncfailure import SyncFailures
from shared.model import Clock, MigrationState, VirtualMachineInstance, utc_now
from shared.model.volumestatus import VolumeStatus
from shared.wire.nics import InterfacesReply

Refresh = Callable[[], Awaitable[VirtualMachineInstance]]


class Requeue(Protocol):
    """The work queue, as the reconcile loop uses it."""

    def add_after(self, key: str, delay: float) -> None: ...

    def add_rate_limited(self, key: str) -> None: ...

    def forget(self, key: str) -> None: ...


class VMIStore(Protocol):
    def get(self, key: str) -> VirtualMachineInstance | None: ...


class StatusPort(Protocol):
    """Writes status (shared.kube.StatusWriter) and re-reads a VMI after a conflict."""

    async def write_status(
        self, old: VirtualMachineInstance, new: VirtualMachineInstance, *, refresh: Refresh
    ) -> VirtualMachineInstance: ...


GetVMI = Callable[[str, str], Awaitable[VirtualMachineInstance]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconcileOptions:
    node: str
    pods_dir: Path
    acpi_interval: float = 3.0
    launcher_missing_timeout: float = 30.0
    guest_info_retry: float = 5.0
    guest_interfaces_refresh: float = 30.0  # a settled guest's interfaces re-read


@dataclass(slots=True)
class Local:
    """What the handler remembers about one VMI between reconciles (lost on restart)."""

    uid: str
    pod_uid: str | None = None  # the launcher pod last found here (kept if activePods drops it)
    stop: StopState | None = None
    guest: GuestFacts | None = None  # while the guest agent is connected
    launcher_deleted: bool = False
    written: tuple[str | None, VirtualMachineInstance] | None = None
    watchdog_reported: int = 0  # watchdog expiries already reported as Events


@dataclass(slots=True)
class Pass:
    """One reconcile pass over one VMI."""

    vmi: VirtualMachineInstance
    local: Local
    launcher: LauncherPort
    error: SyncError | None = None
    guest: GuestFacts | None = None
    migration_state: MigrationState | None = None
    volume_status: tuple[VolumeStatus, ...] | None = None
    resources: hotresources.Outcome | None = None  # CPU/memory hotplug asked this pass
    vsock_cid: int | None = None  # status.VSOCKCID to write (handler/vsock.py)
    nics: InterfacesReply | None = None  # NIC hotplug asked this pass (handler/nichotplug.py)
    revisit: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconcilerDeps:
    store: VMIStore
    domains: DomainCache
    launchers: PoolPort
    status: StatusPort
    get_vmi: GetVMI
    queue: Requeue
    clock: Callable[[], float] = time.monotonic
    wall: Clock = utc_now
    outgoing: OutgoingMigrations = field(default_factory=OutgoingMigrations)
    recorder: Recorder = field(default_factory=DiscardRecorder)
    hotplug: HotplugVolumes | None = None  # None: hotplugged volumes are left alone
    podnet: PodNetworks | None = None  # None: pods are not wired (user-mode masquerade)
    expansion: DiskExpansion | None = None  # None: grown claims are not passed on
    partitions: LeftoverPartitions | None = None  # None: dead launchers' cgroups are left
    # Unexpected errors as Synchronized=False on the VMI (None: only logged)
    failures: SyncFailures | None = None
    vsock: NodeCIDs | None = None  # None: no CIDs (autoattachVSOCK VMIs fail to start)
    linkrefresh: LinkRefresh | None = None  # None: binding plugins' link-refresh not done
