"""`lun` disks: SCSI passthrough of a Block-mode claim's device (`<disk type='block'
device='lun'>` on the virtio-scsi controller): the guest sends SCSI commands that QEMU
passes to the device with SG_IO. Only a device that answers SG_IO can be one (a real SCSI
disk, iSCSI, a SCSI target's LUN); a loop device, which backs many test beds' Block
claims, does not. A lun on a file is refused naming the field (InvalidSpec); one whose
device does not answer SG_IO fails the VMI naming the field, the node and why
(HypervisorUnsupported), never silently run as a plain disk."""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from collections.abc import Sequence
from pathlib import Path

from launcher.domxml import DiskDevice, DiskPlan
from launcher.errors import HypervisorUnsupported, InvalidSpec
from shared.model import Disk, VirtualMachineInstance

SG_GET_VERSION_NUM = 0x2282  # <scsi/sg.h>: answered by every SG_IO-capable device


def device(disk: Disk) -> DiskDevice:
    """The libvirt device of a disk: cdrom, lun or disk."""
    if disk.is_cdrom:
        return DiskDevice.CDROM
    return DiskDevice.LUN if disk.lun is not None else DiskDevice.DISK


def readonly(disk: Disk) -> bool:
    """disk.readonly or lun.readonly set true."""
    target = disk.disk or disk.lun
    return target is not None and target.readonly is True


def sg_io_problem(path: Path) -> str | None:
    """Why `path` cannot take SCSI commands (SG_IO), or None when it can."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        return f"cannot open {path}: {e.strerror}"
    try:
        fcntl.ioctl(fd, SG_GET_VERSION_NUM, struct.pack("i", 0))
    except OSError as e:
        name = errno.errorcode.get(e.errno or 0, str(e.errno))
        return f"{path} does not answer SCSI commands (SG_IO: {name}); not a SCSI device"
    finally:
        os.close(fd)
    return None


def check(vmi: VirtualMachineInstance, plans: Sequence[DiskPlan], *, node: str) -> None:
    """Refuse every lun disk that cannot pass SCSI commands through on this node."""
    index = {d.name: i for i, d in enumerate(vmi.spec.domain.devices.disks)}
    for plan in plans:
        if plan.device is not DiskDevice.LUN:
            continue
        field = f"spec.domain.devices.disks[{index.get(plan.alias, -1)}].lun"
        if not plan.block or plan.source is None:
            message = f"volume {plan.alias} is not a Block-mode claim: a lun needs a device"
            details = {"fields": [{"path": field, "message": message}]}
            raise InvalidSpec(f"{field}: {message}", details)
        why = sg_io_problem(plan.source)
        if why is not None:
            where = f"node {node}" if node else "this node"
            raise HypervisorUnsupported(
                f"{field}: SCSI passthrough on {where} is not possible: {why}",
                {"node": node, "fields": [{"path": field, "message": why}]},
            )
