"""As many disks as validation allows on every bus at once: libvirt and QEMU take them,
the guest boots, and the names go past vdz and sdz."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from shared.model.validation import DISK_BUS_LIMITS
from shared.wire.launcher_api import Method
from tests.integration.launcher.harness import BOOT_MARKER, call, tiny_vmi, wait_for

pytestmark = pytest.mark.integration
Factory = Any


def _bus(disk: dict[str, Any]) -> str:
    target = disk.get("disk") or disk.get("cdrom") or {}
    return str(target.get("bus") or ("sata" if "cdrom" in disk else "virtio"))


async def test_the_per_bus_maximum_of_disks_boots(launchers: Factory) -> None:
    """The per-bus maximum of empty disks on virtio, sata, scsi and usb at once: the
    domain starts, the guest boots, every disk is attached under its own name, vdaa …
    and sdaa … included."""
    vmi = tiny_vmi()
    spec = vmi["spec"]
    for bus, limit in DISK_BUS_LIMITS.items():
        present = [d for d in spec["domain"]["devices"]["disks"] if _bus(d) == bus]
        for i in range(limit - len(present)):
            name = f"{bus}{i}"
            spec["domain"]["devices"]["disks"].append({"name": name, "disk": {"bus": bus}})
            spec["volumes"].append({"name": name, "emptyDisk": {"capacity": "1Mi"}})
    launcher = launchers(vmi)
    await call(launcher, Method.SYNC, {"vmi": launcher.vmi})
    out = subprocess.run(
        ["virsh", "-c", launcher.libvirt_uri, "domblklist", "default_tiny"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    targets = [line.split()[0] for line in out.splitlines()[2:] if line.strip()]
    total = sum(DISK_BUS_LIMITS.values())
    assert len(targets) == len(set(targets)) >= total
    assert {"vdaa", "sdaa"} <= set(targets)
    await wait_for(
        lambda: BOOT_MARKER in launcher.serial(),
        timeout=180, interval=1, what="guest boot with every disk", last=launcher.serial,
    )  # fmt: skip
