"""The driver's CSI services (Identity, Controller, Node) and the kubelet registration
service: one table per service, method name → (request type, coroutine), served through
localkube/csi/rpc.py."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import structlog

from localkube.csi import proto as p
from localkube.csi.errors import Code, CsiError
from localkube.csi.node import NodeVolumes
from localkube.csi.rpc import handler
from localkube.csi.store import Store, VolumeMeta, capacity_for, check_id

log = structlog.get_logger()
DRIVER = "csi.localkube.kubevirt-py.io"
VERSION = "0.1.0"


CONTROLLER_RPCS = (
    p.ControllerRpc.CREATE_DELETE_VOLUME,
    p.ControllerRpc.CREATE_DELETE_SNAPSHOT,
    p.ControllerRpc.LIST_SNAPSHOTS,
    p.ControllerRpc.CLONE_VOLUME,
    p.ControllerRpc.EXPAND_VOLUME,
)


def _capabilities(rpcs: tuple[int, ...]) -> p.CapabilitiesResponse:
    return p.CapabilitiesResponse(capabilities=tuple(p.RpcCap(rpc=p.TypeCap(type=r)) for r in rpcs))


def identity_handler(*, controller: bool) -> Any:
    async def info(_: p.Empty) -> p.GetPluginInfoResponse:
        return p.GetPluginInfoResponse(name=DRIVER, vendor_version=VERSION)

    async def capabilities(_: p.Empty) -> p.GetPluginCapabilitiesResponse:
        caps = [p.PluginCapability(volume_expansion=p.TypeCap(type=p.ExpansionType.ONLINE))]
        if controller:
            caps.append(
                p.PluginCapability(service=p.TypeCap(type=p.ServiceType.CONTROLLER_SERVICE))
            )
        return p.GetPluginCapabilitiesResponse(capabilities=tuple(caps))

    async def probe(_: p.Empty) -> p.ProbeResponse:
        return p.ProbeResponse()

    return handler(
        f"{p.CSI_PACKAGE}.Identity",
        {
            "GetPluginInfo": (p.Empty, info),
            "GetPluginCapabilities": (p.Empty, capabilities),
            "Probe": (p.Empty, probe),
        },
    )


def wants_block(caps: tuple[p.VolumeCapability, ...]) -> bool:
    """Block when every capability asks for block; INVALID_ARGUMENT when they mix or none."""
    if not caps:
        raise CsiError(Code.INVALID_ARGUMENT, "volume_capabilities: none given")
    kinds = {c.block is not None for c in caps}
    if len(kinds) > 1:
        raise CsiError(Code.INVALID_ARGUMENT, "volume_capabilities: both block and mount")
    if any(c.block is None and c.mount is None for c in caps):
        raise CsiError(Code.INVALID_ARGUMENT, "volume_capabilities: no access type")
    return kinds.pop()


def content_source(source: p.ContentSource | None) -> str:
    """The store's `source` for a CreateVolume content source."""
    if source is None:
        return ""
    if source.volume is not None:
        return f"volume:{check_id(source.volume.volume_id, what='source volume_id')}"
    if source.snapshot is not None:
        return f"snapshot:{check_id(source.snapshot.snapshot_id, what='source snapshot_id')}"
    raise CsiError(Code.INVALID_ARGUMENT, "volume_content_source: neither volume nor snapshot")


def _volume(meta: VolumeMeta, source: p.ContentSource | None) -> p.Volume:
    return p.Volume(capacity_bytes=meta.capacity, volume_id=meta.id, content_source=source)


def _snapshot(snap: Any) -> p.Snapshot:
    seconds = int(snap.created)
    return p.Snapshot(
        size_bytes=snap.size,
        snapshot_id=snap.id,
        source_volume_id=snap.source_volume,
        creation_time=p.Timestamp(seconds=seconds, nanos=int((snap.created - seconds) * 1e9)),
        ready_to_use=True,
    )


def controller_handler(store: Store) -> Any:
    async def create(req: p.CreateVolumeRequest) -> p.CreateVolumeResponse:
        rng = req.capacity_range or p.CapacityRange()
        want = VolumeMeta(
            id=check_id(req.name, what="name"),
            capacity=capacity_for(rng.required_bytes, rng.limit_bytes),
            block=wants_block(req.volume_capabilities),
            source=content_source(req.volume_content_source),
        )
        meta = await store.create_volume(want)
        log.info("volume_created", volume=meta.id, capacity=meta.capacity, block=meta.block)
        return p.CreateVolumeResponse(volume=_volume(meta, req.volume_content_source))

    async def delete(req: p.DeleteVolumeRequest) -> p.Empty:
        store.delete_volume(req.volume_id)
        log.info("volume_deleted", volume=req.volume_id)
        return p.Empty()

    async def capabilities(_: p.Empty) -> p.CapabilitiesResponse:
        return _capabilities(CONTROLLER_RPCS)

    async def validate(
        req: p.ValidateVolumeCapabilitiesRequest,
    ) -> p.ValidateVolumeCapabilitiesResponse:
        meta = store.volume(req.volume_id)
        if wants_block(req.volume_capabilities) != meta.block:
            return p.ValidateVolumeCapabilitiesResponse(message="access type differs")
        confirmed = p.Confirmed(volume_capabilities=req.volume_capabilities)
        return p.ValidateVolumeCapabilitiesResponse(confirmed=confirmed)

    async def snapshot(req: p.CreateSnapshotRequest) -> p.CreateSnapshotResponse:
        snap = await store.create_snapshot(
            check_id(req.name, what="name"),
            check_id(req.source_volume_id, what="source_volume_id"),
        )
        log.info("snapshot_created", snapshot=snap.id, volume=snap.source_volume)
        return p.CreateSnapshotResponse(snapshot=_snapshot(snap))

    async def delete_snapshot(req: p.DeleteSnapshotRequest) -> p.Empty:
        store.delete_snapshot(req.snapshot_id)
        log.info("snapshot_deleted", snapshot=req.snapshot_id)
        return p.Empty()

    async def list_snapshots(req: p.ListSnapshotsRequest) -> p.ListSnapshotsResponse:
        try:
            found = store.snapshots_of(req.source_volume_id, req.snapshot_id)
        except CsiError:
            found = []
        entries = tuple(p.SnapshotEntry(snapshot=_snapshot(s)) for s in found)
        return p.ListSnapshotsResponse(entries=entries)

    async def expand(req: p.ControllerExpandVolumeRequest) -> p.ControllerExpandVolumeResponse:
        rng = req.capacity_range or p.CapacityRange()
        meta = store.expand_volume(req.volume_id, capacity_for(rng.required_bytes, rng.limit_bytes))
        log.info("volume_expanded", volume=meta.id, capacity=meta.capacity)
        return p.ControllerExpandVolumeResponse(
            capacity_bytes=meta.capacity, node_expansion_required=meta.block
        )

    return handler(
        f"{p.CSI_PACKAGE}.Controller",
        {
            "CreateVolume": (p.CreateVolumeRequest, create),
            "DeleteVolume": (p.DeleteVolumeRequest, delete),
            "ControllerGetCapabilities": (p.Empty, capabilities),
            "ValidateVolumeCapabilities": (p.ValidateVolumeCapabilitiesRequest, validate),
            "CreateSnapshot": (p.CreateSnapshotRequest, snapshot),
            "DeleteSnapshot": (p.DeleteSnapshotRequest, delete_snapshot),
            "ListSnapshots": (p.ListSnapshotsRequest, list_snapshots),
            "ControllerExpandVolume": (p.ControllerExpandVolumeRequest, expand),
        },
    )


def node_handler(volumes: NodeVolumes, *, node_id: str) -> Any:
    async def publish(req: p.NodePublishVolumeRequest) -> p.Empty:
        cap = req.volume_capability
        if cap is None or (cap.block is None and cap.mount is None):
            raise CsiError(Code.INVALID_ARGUMENT, "volume_capability: no access type")
        if not req.target_path:
            raise CsiError(Code.INVALID_ARGUMENT, "target_path: empty")
        await volumes.publish(
            volume_id=req.volume_id,
            target=Path(req.target_path),
            block=cap.block is not None,
            readonly=req.readonly,
        )
        return p.Empty()

    async def unpublish(req: p.NodeUnpublishVolumeRequest) -> p.Empty:
        if not req.target_path:
            raise CsiError(Code.INVALID_ARGUMENT, "target_path: empty")
        await volumes.unpublish(volume_id=req.volume_id, target=Path(req.target_path))
        return p.Empty()

    async def capabilities(_: p.Empty) -> p.CapabilitiesResponse:
        return _capabilities((p.NodeRpc.GET_VOLUME_STATS, p.NodeRpc.EXPAND_VOLUME))

    async def info(_: p.Empty) -> p.NodeGetInfoResponse:
        return p.NodeGetInfoResponse(node_id=node_id)

    async def expand(req: p.NodeExpandVolumeRequest) -> p.NodeExpandVolumeResponse:
        return p.NodeExpandVolumeResponse(
            capacity_bytes=await volumes.expand(volume_id=req.volume_id)
        )

    async def stats(req: p.NodeGetVolumeStatsRequest) -> p.NodeGetVolumeStatsResponse:
        path = Path(req.volume_path)
        if not path.exists():
            raise CsiError(Code.NOT_FOUND, f"volume_path {path} does not exist")
        meta = volumes.store.volume(req.volume_id)
        if meta.block:
            usage = p.VolumeUsage(total=meta.capacity, unit=1)
        else:
            total, used, free = volumes.usage(path)
            usage = p.VolumeUsage(total=total, used=used, available=free, unit=1)
        return p.NodeGetVolumeStatsResponse(usage=(usage,))

    return handler(
        f"{p.CSI_PACKAGE}.Node",
        {
            "NodePublishVolume": (p.NodePublishVolumeRequest, publish),
            "NodeUnpublishVolume": (p.NodeUnpublishVolumeRequest, unpublish),
            "NodeGetCapabilities": (p.Empty, capabilities),
            "NodeGetInfo": (p.Empty, info),
            "NodeExpandVolume": (p.NodeExpandVolumeRequest, expand),
            "NodeGetVolumeStats": (p.NodeGetVolumeStatsRequest, stats),
        },
    )


def registration_handler(*, endpoint: Path) -> Any:
    """The kubelet's plugin watcher asks GetInfo on the socket in its plugins_registry
    directory, then reports whether it took the driver."""

    async def info(_: p.Empty) -> p.PluginInfo:
        return p.PluginInfo(
            type="CSIPlugin", name=DRIVER, endpoint=str(endpoint), supported_versions=("1.0.0",)
        )

    async def status(req: p.RegistrationStatus) -> p.Empty:
        if req.plugin_registered:
            log.info("kubelet_registered_driver", at=time.time())
        else:
            log.error("kubelet_refused_driver", error=req.error)
        return p.Empty()

    return handler(
        p.REGISTRATION_SERVICE,
        {"GetInfo": (p.Empty, info), "NotifyRegistrationStatus": (p.RegistrationStatus, status)},
    )
