"""The test-bed CSI driver's wire and decisions: CSI messages as the Go sidecars encode
them, the controller service over a real gRPC unix socket, the node's mount and loop
bookkeeping, and the expansion loop's choice of claims."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import pytest

from localkube.csi import proto as p
from localkube.csi.errors import Code, CsiError
from localkube.csi.expander import claim_status_patch, pending_resizes
from localkube.csi.node import loops_of, mounted
from localkube.csi.rpc import call, serving
from localkube.csi.service import (
    DRIVER,
    content_source,
    controller_handler,
    identity_handler,
    wants_block,
)
from localkube.csi.store import MIB, Store

R = TypeVar("R")
BLOCK = p.VolumeCapability(block=p.Empty(), access_mode=p.AccessMode(mode=5))
MOUNT = p.VolumeCapability(mount=p.MountVolume(fs_type="ext4"), access_mode=p.AccessMode(mode=1))


def test_a_block_capability_survives_the_wire() -> None:
    """An empty `block` message is still present after encoding (the oneof's choice), so
    a CreateVolumeRequest keeps asking for block; its map and content source too."""
    req = p.CreateVolumeRequest(
        name="pvc-1",
        capacity_range=p.CapacityRange(required_bytes=5 * MIB),
        volume_capabilities=(BLOCK,),
        parameters={"csi.storage.k8s.io/pvc/name": "c"},
        volume_content_source=p.ContentSource(volume=p.VolumeSource(volume_id="pvc-0")),
    )
    back = p.CreateVolumeRequest.decode(req.encode())
    assert back == req
    assert wants_block(back.volume_capabilities) is True
    assert content_source(back.volume_content_source) == "volume:pvc-0"


def test_capabilities_must_agree_on_the_access_type() -> None:
    """Block and mount together, or none, is INVALID_ARGUMENT."""
    assert wants_block((MOUNT,)) is False
    for caps in ((), (BLOCK, MOUNT), (p.VolumeCapability(),)):
        with pytest.raises(CsiError):
            wants_block(caps)


async def test_controller_over_grpc(tmp_path: Path) -> None:
    """Through a real gRPC unix socket: the plugin's name, a block volume created, and a
    clone of a missing volume refused with NOT_FOUND (the status code the sidecar sees)."""
    store = Store(tmp_path / "root")
    store.ensure()
    sock = tmp_path / "c.sock"
    handlers = (identity_handler(controller=True), controller_handler(store))
    ch = sock
    async with serving(sock, *handlers):
        info = await _call(ch, "Identity/GetPluginInfo", p.Empty(), p.GetPluginInfoResponse)
        assert info.name == DRIVER
        req = p.CreateVolumeRequest(
            name="pvc-1", capacity_range=p.CapacityRange(required_bytes=MIB),
            volume_capabilities=(BLOCK,),
        )  # fmt: skip
        made = await _call(ch, "Controller/CreateVolume", req, p.CreateVolumeResponse)
        assert made.volume == p.Volume(capacity_bytes=MIB, volume_id="pvc-1")
        clone = p.CreateVolumeRequest(
            name="pvc-2", volume_capabilities=(BLOCK,),
            volume_content_source=p.ContentSource(volume=p.VolumeSource(volume_id="pvc-9")),
        )  # fmt: skip
        with pytest.raises(CsiError) as err:
            await _call(ch, "Controller/CreateVolume", clone, p.CreateVolumeResponse)
        assert err.value.code is Code.NOT_FOUND
        expand = p.ControllerExpandVolumeRequest(
            volume_id="pvc-1", capacity_range=p.CapacityRange(required_bytes=2 * MIB)
        )
        reply = await _call(
            ch, "Controller/ControllerExpandVolume", expand, p.ControllerExpandVolumeResponse
        )
        assert reply == p.ControllerExpandVolumeResponse(
            capacity_bytes=2 * MIB, node_expansion_required=True
        )
    assert not sock.exists()


async def _call(sock: Path, method: str, request: object, reply: type[R]) -> R:
    return await call(sock, f"/{p.CSI_PACKAGE}.{method}", request, reply, timeout=10)


def test_mount_points_are_read_from_mountinfo() -> None:
    """The fifth mountinfo field is the mount point (spaces escaped as \\040)."""
    info = (
        "36 35 98:0 /mnt1 /var/lib/kubelet/pods/x/mount rw - ext3 /dev/root rw\n"
        "37 35 98:0 / /a\\040b rw - ext3 /dev/root rw\n"
    )
    assert mounted(Path("/var/lib/kubelet/pods/x/mount"), info)
    assert mounted(Path("/a b"), info)
    assert not mounted(Path("/var/lib/kubelet"), info)


def test_loops_over_a_file_are_found_in_sysfs(tmp_path: Path) -> None:
    """Loop devices whose backing file is the volume's, also once the file is deleted."""
    for name, backing in (
        ("loop0", "/d/disk.raw"),
        ("loop1", "/x"),
        ("loop7", "/d/disk.raw (deleted)"),
    ):
        (tmp_path / name / "loop").mkdir(parents=True)
        (tmp_path / name / "loop" / "backing_file").write_text(backing + "\n")
    assert loops_of(Path("/d/disk.raw"), tmp_path) == ["/dev/loop0", "/dev/loop7"]


def _pv(name: str, size: str, driver: str = DRIVER) -> dict[str, object]:
    return {
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": size}, "csi": {"driver": driver, "volumeHandle": name}},
    }


def _pvc(name: str, size: str, pv: str, phase: str = "Bound") -> dict[str, object]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"volumeName": pv, "resources": {"requests": {"storage": size}}},
        "status": {"phase": phase},
    }


def test_only_bound_claims_of_the_driver_asking_for_more_are_expanded() -> None:
    """A claim asking past its PV's capacity is expanded; one at its size, one of another
    driver or one not bound is left alone."""
    pvs = [_pv("pv-a", "1Gi"), _pv("pv-b", "1Gi"), _pv("pv-c", "1Gi", "other"), _pv("pv-d", "1Gi")]
    claims = [
        _pvc("a", "2Gi", "pv-a"),
        _pvc("b", "1Gi", "pv-b"),
        _pvc("c", "2Gi", "pv-c"),
        _pvc("d", "2Gi", "pv-d", phase="Pending"),
    ]
    (resize,) = pending_resizes(claims, pvs)
    assert (resize.claim, resize.pv, resize.volume_id, resize.size) == (
        "a",
        "pv-a",
        "pv-a",
        2 << 30,
    )
    done = claim_status_patch(resize, node_step=False)["status"]
    assert done["capacity"] == {"storage": str(2 << 30)}
    pending = claim_status_patch(resize, node_step=True)["status"]
    assert pending["allocatedResourceStatuses"] == {"storage": "NodeResizePending"}
    assert "capacity" not in pending
