"""NIC hotplug and unplug of a running VMI, virt-handler's part (shared/nics.py).

When the VMI's hot-pluggable NICs differ from what status.interfaces lists — a NIC
added whose pod was wired for it (a migration target made after the hotplug), or one
marked absent the domain still has — the handler hands the launcher the VMI
(`sync_interfaces`, launcher/nichotplug.py), which attaches or detaches, and writes
status.interfaces from the interfaces the domain has now: the entry comes with the
attach and goes with the detach. Nothing is done while the VMI migrates (the target's
handler asks once the guest runs there). A detach the guest has not finished yet is
asked about again shortly.
"""

from __future__ import annotations

import dataclasses

import structlog

from handler.commands import sync_error
from handler.launchers import LauncherPort
from shared import nics
from shared.model import VirtualMachineInstance, VMIPhase, VMIStatus
from shared.wire.errors import CommandFailed, ErrorCode, RemoteError, WireError
from shared.wire.launcher_api import Method
from shared.wire.nics import InterfacesReply, SyncInterfacesArgs

log = structlog.get_logger("handler.nichotplug")

AGENT_ONLY = "guest-agent"
RETRY_SECONDS = 2.0  # a detach the guest has not completed yet


def _listed(status: VMIStatus) -> set[str]:
    return {i.name for i in status.interfaces if i.name and i.info_source != AGENT_ONLY}


def wanted(vmi: VirtualMachineInstance) -> bool:
    """A Running, not migrating VMI whose hot-pluggable NICs are not what its status lists."""
    if vmi.status.phase is not VMIPhase.RUNNING:
        return False
    migration = vmi.status.migration_state
    if migration is not None and not migration.completed and not migration.failed:
        return False
    spec = vmi.spec
    hot = [i for i in spec.domain.devices.interfaces if nics.hot_pluggable(spec, i)]
    if not hot:
        return False
    listed = _listed(vmi.status)
    return any((i.name in listed) == nics.is_absent(i) for i in hot)


async def apply(launcher: LauncherPort, vmi: VirtualMachineInstance) -> InterfacesReply | None:
    """Ask the launcher; None from a launcher without the command (an older image)."""
    args = SyncInterfacesArgs(vmi=vmi.to_dict()).to_wire()
    try:
        raw = await launcher.call(Method.SYNC_INTERFACES, args)
    except (CommandFailed, RemoteError) as exc:
        if exc.code is ErrorCode.UNKNOWN_METHOD:
            log.warning("sync_interfaces_unsupported", error=exc.message)
            return None
        raise sync_error(Method.SYNC_INTERFACES, exc) from exc
    except WireError as exc:
        raise sync_error(Method.SYNC_INTERFACES, exc) from exc
    reply = InterfacesReply.from_wire(raw)
    if reply.attached or reply.detached:
        log.info("nics_synced", attached=list(reply.attached), detached=list(reply.detached))
    return reply


def pending(vmi: VirtualMachineInstance, reply: InterfacesReply) -> bool:
    """A NIC marked absent is still in the domain (the guest has not let go yet)."""
    gone = {i.name for i in vmi.spec.domain.devices.interfaces if nics.is_absent(i)}
    return bool(gone & set(reply.present))


def with_interfaces(
    vmi: VirtualMachineInstance, status: VMIStatus, reply: InterfacesReply
) -> VMIStatus:
    """status.interfaces: the VMI's interfaces the domain has (those it lacks dropped, new
    ones added from the spec), the guest agent's own entries kept."""
    present = set(reply.present)
    spec_names = {i.name for i in vmi.spec.domain.devices.interfaces}
    kept = [
        i
        for i in status.interfaces
        if i.info_source == AGENT_ONLY or i.name in present or i.name not in spec_names
    ]
    known = {i.name for i in kept}
    added = [s for s in vmi.interface_statuses(pod_ip=None) if s.name in present - known]
    interfaces = (*kept, *added)
    if interfaces == status.interfaces:
        return status
    return dataclasses.replace(status, interfaces=interfaces)
