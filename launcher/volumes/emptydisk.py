"""emptyDisk: a qcow2 of its capacity made on first start, kept across restarts of the pod."""

from __future__ import annotations

from launcher.disks import run_tool
from launcher.volumes.base import ResolvedDisk, VolumeRequest
from shared.model.quantity import parse_bytes
from shared.model.volumes import EmptyDiskSource


async def resolve(req: VolumeRequest, source: EmptyDiskSource) -> ResolvedDisk:
    path = req.ctx.work_dir / f"{req.name}-empty.qcow2"
    if path.exists():
        return ResolvedDisk(path=path, format="qcow2")
    size = parse_bytes(source.capacity if source.capacity is not None else "0")
    await run_tool(
        "qemu-img", "create", "-q", "-f", "qcow2", str(path), str(size),
        what="creating the empty disk",
    )  # fmt: skip
    return ResolvedDisk(path=path, format="qcow2", created=(path,))
