"""The launcher as a real container runs it: no CAP_SYS_ADMIN (so no `unshare --mount`),
libvirt's system dirs its own, /sys/fs/cgroup read-only. libvirtd then runs without bind
mounts and without cgroups, the guest boots from the pod's container-disks copies, QEMU
stays in the launcher's cgroups, and nothing of the host's libvirt config is touched.

The "container" is made here the way a runtime would: a mount namespace with fresh
tmpfs over libvirt's dirs, the cgroup mounts remounted read-only, CAP_SYS_ADMIN dropped
from the bounding and inheritable sets before the launcher is exec'd."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from shared.wire.launcher_api import Method
from tests.integration.launcher.harness import (
    BOOT_MARKER,
    Launcher,
    call,
    qemu_pids_under,
    tiny_vmi,
    wait_for,
)

pytestmark = pytest.mark.integration
CAP_SYS_ADMIN = 21
CONTAINER = """set -e
for d in /run/libvirt /var/lib/libvirt /var/cache/libvirt /var/log/libvirt /etc/libvirt; do
  mkdir -p "$d"; mount -t tmpfs tmpfs "$d"
done
findmnt -rn -o TARGET -R /sys/fs/cgroup | while read -r m; do mount -o remount,bind,ro "$m"; done
exec setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin -- "$@"
"""
WRAPPER = ("unshare", "--mount", "--propagation", "private", "--", "sh", "-c", CONTAINER, "ctr")


def _cap_eff(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no CapEff for {pid}")


def _cgroups(pid: int) -> str:
    return Path(f"/proc/{pid}/cgroup").read_text()


async def test_launcher_without_cap_sys_admin_boots_the_guest(
    launchers: Callable[..., Launcher],
) -> None:
    """No CAP_SYS_ADMIN, read-only cgroupfs: libvirtd starts in the container's own
    filesystem with no libvirt cgroups; the guest boots; QEMU runs without CAP_SYS_ADMIN
    in the launcher's own cgroups; the host's /etc/libvirt/qemu.conf is untouched."""
    host_conf = Path("/etc/libvirt/qemu.conf")
    before = host_conf.read_bytes() if host_conf.exists() else None
    launcher = launchers(tiny_vmi(name="ctr"), wrapper=WRAPPER)
    assert launcher.process is not None
    assert "isolation=container" in launcher.logs()
    assert "cgroups=False" in launcher.logs()
    await call(launcher, Method.SYNC, {"vmi": launcher.vmi})
    await wait_for(
        lambda: BOOT_MARKER in launcher.serial(),
        timeout=120,
        what="boot marker",
        last=launcher.serial,
    )
    (qemu,) = qemu_pids_under(launcher.root)
    assert not _cap_eff(qemu) >> CAP_SYS_ADMIN & 1
    assert _cgroups(qemu) == _cgroups(launcher.process.pid)
    assert (host_conf.read_bytes() if host_conf.exists() else None) == before
    assert launcher.terminate(timeout=60) == 0
