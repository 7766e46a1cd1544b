"""downwardMetrics volume: the vhostmd disk (shared/vhostmddisk.py) at
`PRIVATE_DIR/downwardmetrics/vhostmd0`, made with empty metrics on the first start, raw and
read-only in the guest; virt-handler rewrites it from the node (handler/downwardmetrics.py)."""

from __future__ import annotations

from launcher.volumes.base import ResolvedDisk, VolumeRequest
from shared import podlayout, vhostmddisk
from shared.model.volumes import DownwardMetricsVolumeSource


async def resolve(req: VolumeRequest, source: DownwardMetricsVolumeSource) -> ResolvedDisk:
    del source
    private = req.ctx.vmi_disks.parent  # the private dir (DiskContext's layout)
    path = private / podlayout.DOWNWARD_METRICS_DISK
    if path.exists():
        return ResolvedDisk(path=path, format="raw", readonly=True)
    path.parent.mkdir(exist_ok=True)
    vhostmddisk.create(path)
    return ResolvedDisk(path=path, format="raw", readonly=True, created=(path,))
