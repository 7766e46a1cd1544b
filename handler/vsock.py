"""autoattachVSOCK: each such VMI on this node gets a vsock context ID (CID) no other VMI
here holds, kept in its status.VSOCKCID (the handler is that field's one writer) and
handed to the launcher with the VMI, which gives the guest `<vsock><cid address=N/>`.

CIDs 0-2 are the hypervisor's, the local loopback and the host's: guests take 3 upward.
The CIDs in use are those the node's VMIs carry in their status (the informer's store)
plus those handed out by this handler and not yet seen there (a status write in flight),
so two VMIs starting together never get the same one. A VMI keeps its CID for as long as
it lives; a CID is free again once its VMI is final or gone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from shared.model import VirtualMachineInstance

FIRST_CID = 3
MAX_CID = 2**32 - 2  # U32_MAX is VMADDR_CID_ANY


@dataclass(slots=True, kw_only=True)
class NodeCIDs:
    """The CIDs of this node's VMIs; `vmis` lists the informer's VMIs (all of this node)."""

    vmis: Callable[[], Iterable[VirtualMachineInstance]]
    handed_out: dict[str, int] = field(default_factory=dict)  # VMI uid → CID

    def cid_for(self, vmi: VirtualMachineInstance) -> int | None:
        """The VMI's CID (its own, else the lowest free one); None without autoattachVSOCK."""
        if not vmi.spec.domain.devices.autoattach_vsock:
            return None
        own = vmi.status.vsock_cid or self.handed_out.get(vmi.uid)
        if own is not None:
            self.handed_out[vmi.uid] = own
            return own
        taken = self._taken(exclude=vmi.uid)
        cid = next(c for c in range(FIRST_CID, MAX_CID) if c not in taken)
        self.handed_out[vmi.uid] = cid
        return cid

    def release(self, uid: str) -> None:
        """The VMI is gone from this node: its CID may be handed out again."""
        self.handed_out.pop(uid, None)

    def _taken(self, *, exclude: str) -> set[int]:
        taken = {cid for uid, cid in self.handed_out.items() if uid != exclude}
        for other in self.vmis():
            cid = other.status.vsock_cid
            if cid is not None and other.uid != exclude and not other.is_final():
                taken.add(cid)
        return taken


def with_cid(
    cids: NodeCIDs | None, vmi: VirtualMachineInstance
) -> tuple[VirtualMachineInstance, int | None]:
    """The VMI as its launcher gets it (status.VSOCKCID set) and the CID the status write
    must add (None: nothing new, or no autoattachVSOCK)."""
    cid = cids.cid_for(vmi) if cids is not None else None
    if cid is None or cid == vmi.status.vsock_cid:
        return vmi, None
    status = dataclasses.replace(vmi.status, vsock_cid=cid)
    return dataclasses.replace(vmi, status=status), cid
