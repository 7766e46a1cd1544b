"""cloudInitNoCloud: a NoCloud ISO (volume label cidata) on a cdrom, rebuilt each start."""

from __future__ import annotations

import base64

from launcher.disks import run_tool
from launcher.volumes.base import ResolvedDisk, VolumeRequest
from shared.model.volumes import CloudInitNoCloudSource


def _decoded(text: str | None, b64: str | None) -> bytes | None:
    if b64 is not None:
        return base64.b64decode(b64)
    return None if text is None else text.encode()


async def resolve(req: VolumeRequest, source: CloudInitNoCloudSource) -> ResolvedDisk:
    ctx, meta_obj = req.ctx, req.vmi.metadata
    data_dir = ctx.work_dir / f"cloud-init-{req.name}"
    data_dir.mkdir(parents=True, exist_ok=True)
    user = _decoded(source.user_data, source.user_data_base64) or b""
    network = _decoded(source.network_data, source.network_data_base64)
    (data_dir / "user-data").write_bytes(user)
    meta = f"instance-id: {meta_obj.uid or meta_obj.name}\n"
    meta += f"local-hostname: {meta_obj.name}\n"
    (data_dir / "meta-data").write_text(meta)
    if network is not None:
        (data_dir / "network-config").write_bytes(network)
    iso = ctx.work_dir / f"{req.name}-cloudinit.iso"
    await run_tool(
        "genisoimage", "-quiet", "-output", str(iso), "-volid", "cidata", "-joliet", "-rock",
        str(data_dir), what="building the cloud-init ISO",
    )  # fmt: skip
    return ResolvedDisk(path=iso, format="raw")
