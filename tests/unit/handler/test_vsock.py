"""autoattachVSOCK's CIDs (handler/vsock.py): unique among the node's VMIs from 3 up,
kept by a VMI for its life, free again once it is final or gone; the reconcile pass
hands the launcher the VMI with its CID and writes status.VSOCKCID in the same write."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from handler.vsock import NodeCIDs
from shared.model import VirtualMachineInstance, VMIPhase
from tests.unit.handler.fakes import FakeLauncher, vmi_dict
from tests.unit.handler.rig import Rig


def _vmi(
    uid: str, *, cid: int | None = None, vsock: bool = True, phase: str = "Running"
) -> VirtualMachineInstance:
    raw = vmi_dict(name=f"v-{uid}", phase=phase)
    raw["metadata"]["uid"] = uid
    raw["spec"]["domain"]["devices"]["autoattachVSOCK"] = vsock
    if cid is not None:
        raw["status"]["VSOCKCID"] = cid
    return VirtualMachineInstance.from_dict(raw)


def test_cids_start_at_3_and_skip_those_in_use() -> None:
    """The lowest CID neither in a node VMI's status nor handed out and unwritten yet."""
    node = [_vmi("a", cid=3), _vmi("b", cid=5)]
    cids = NodeCIDs(vmis=lambda: node)
    assert cids.cid_for(_vmi("c")) == 4
    assert cids.cid_for(_vmi("d")) == 6  # 4 handed out to c, its status not written yet
    assert cids.cid_for(_vmi("c")) == 4  # asked again: the same


def test_a_vmi_keeps_its_cid_and_frees_it_when_final_or_released() -> None:
    """A VMI's own status CID is its CID; a final VMI's CID and a released one are free."""
    node = [_vmi("a", cid=3, phase="Succeeded")]
    cids = NodeCIDs(vmis=lambda: node)
    assert cids.cid_for(_vmi("b", cid=9)) == 9
    assert cids.cid_for(_vmi("c")) == 3
    cids.release("c")
    assert cids.cid_for(_vmi("d")) == 3


def test_no_cid_without_autoattach_vsock() -> None:
    """autoattachVSOCK unset or false: no CID, nothing handed out."""
    cids = NodeCIDs(vmis=list)
    assert cids.cid_for(_vmi("a", vsock=False)) is None
    assert cids.handed_out == {}


@dataclass
class RecordingLauncher(FakeLauncher):
    """A fake launcher that keeps the VMI each Sync carried."""

    synced: list[Mapping[str, Any]] = field(default_factory=list)

    def _sync(self, args: Mapping[str, Any]) -> Any:
        self.synced.append(args["vmi"])
        return super()._sync(args)


async def test_the_launcher_gets_the_cid_and_the_status_keeps_it() -> None:
    """A Scheduled autoattachVSOCK VMI: Sync carries status.VSOCKCID 3 and the one status
    write stores it; a second VMI on the node gets 4."""
    rig = Rig()
    rig.reconciler = rig.fresh_reconciler(vsock=NodeCIDs(vmis=rig.store.list))
    cids = []
    for name in ("first", "second"):
        raw = vmi_dict(name=name)
        raw["metadata"]["uid"] = f"uid-{name}"
        raw["spec"]["domain"]["devices"]["autoattachVSOCK"] = True
        key = rig.put(raw)
        launcher = rig.pool.launchers.setdefault(f"uid-{name}", RecordingLauncher())
        vmi = await rig.process(key)
        assert vmi.status.phase is VMIPhase.RUNNING
        assert isinstance(launcher, RecordingLauncher)
        assert launcher.synced[0]["status"]["VSOCKCID"] == vmi.status.vsock_cid
        assert rig.api.status_writes[key] == 1
        cids.append(rig.api.vmi(key).status.vsock_cid)
        rig.informer_sync()
    assert cids == [3, 4]
