"""containerDisk: an ephemeral qcow2 overlay over the image's disk, mounted read-only as an
image volume (or the copy the pod's init container made, the fallback): the disk stays a
read-only backing file (KubeVirt's behaviour)."""

from __future__ import annotations

from launcher.disks import container_disk_file, format_of, run_tool
from launcher.volumes.base import ResolvedDisk, VolumeRequest
from shared.model.volumes import ContainerDiskSource


async def resolve(req: VolumeRequest, source: ContainerDiskSource) -> ResolvedDisk:
    image = container_disk_file(
        req.ctx,
        req.name,
        field=f"{req.field}.containerDisk",
        image=source.image or "",
        path=source.path,
    )
    overlay = req.ctx.work_dir / f"{req.name}-overlay.qcow2"
    if overlay.exists():
        return ResolvedDisk(path=overlay, format="qcow2")
    await run_tool(
        "qemu-img", "create", "-q", "-f", "qcow2", "-F", format_of(image), "-b", str(image),
        str(overlay), what="creating the containerDisk overlay",
    )  # fmt: skip
    return ResolvedDisk(path=overlay, format="qcow2", created=(overlay,))
