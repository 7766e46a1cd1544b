"""Claims expanded under a running guest (KubeVirt's ExpandDisks feature gate).

The controller keeps each claim volume's status.volumeStatus[].persistentVolumeClaimInfo
in step with its claim (capacity grows when the claim is expanded). While the gate is on,
the handler sends a Running VMI's claim capacities to its launcher (`expand_disks`)
whenever they differ from what it last sent; the launcher grows each disk the guest sees
as smaller (controller → handler → launcher, as for every other change). Not during a
migration: the target's handler sends them once the VMI runs there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import structlog

from handler import commands
from handler.launchers import LauncherPort
from shared.model import VirtualMachineInstance, VMIPhase
from shared.model.errors import QuantityError
from shared.model.quantity import parse_bytes

log = structlog.get_logger("handler.expand")

EXPAND_DISKS_GATE = "ExpandDisks"


def claim_capacities(vmi: VirtualMachineInstance) -> dict[str, int]:
    """Each writable claim volume's capacity in bytes, as the VMI's volumeStatus says."""
    writable = {
        v.name for v in vmi.spec.volumes if v.name and v.claim is not None and not v.claim.read_only
    }
    out: dict[str, int] = {}
    for entry in vmi.status.volume_status:
        info = entry.persistent_volume_claim_info
        if entry.name not in writable or info is None:
            continue
        storage = info.capacity.get("storage")
        try:
            size = parse_bytes(storage) if storage else 0
        except QuantityError:
            continue
        if size > 0 and entry.name:
            out[entry.name] = size
    return out


def _migrating(vmi: VirtualMachineInstance) -> bool:
    state = vmi.status.migration_state
    return state is not None and not (state.completed or state.failed)


class DiskExpansion:
    """Sends claim capacities to launchers while gate ExpandDisks is on."""

    def __init__(self, *, enabled: Callable[[], bool]) -> None:
        self._enabled = enabled
        self._sent: dict[str, Mapping[str, int]] = {}  # VMI uid → capacities last applied

    async def sync(self, vmi: VirtualMachineInstance, launcher: LauncherPort) -> None:
        """Grow the guest's disks if its claims grew since the last call (SyncError on a
        failed launcher call: the reconcile loop retries)."""
        if vmi.status.phase is not VMIPhase.RUNNING or _migrating(vmi) or not self._enabled():
            return
        wanted = claim_capacities(vmi)
        if not wanted or self._sent.get(vmi.uid) == wanted:
            return
        reply = await commands.expand_disks(launcher, wanted)
        self._sent[vmi.uid] = wanted
        if reply.expanded:
            log.info("disks_expanded", sizes=dict(reply.expanded))

    def release(self, uid: str) -> None:
        """Forget a VMI (its launcher is gone)."""
        self._sent.pop(uid, None)
