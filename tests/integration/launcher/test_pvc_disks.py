"""PVC disks as the launcher sees them in its pod (a claim mounted at vmi-disks/<volume>):
the guest writes to a disk.img the launcher made to the claim's size, the data is there
for the next launcher, and a readOnly claim stays read-only inside the guest."""

from __future__ import annotations

from typing import Any

import pytest

from shared.wire.launcher_api import Method
from tests.integration.launcher.harness import Launcher, call, tiny_vmi, wait_for

pytestmark = pytest.mark.integration
Factory = Any
MI = 1024 * 1024


def _pvc_vmi(*, read_only: bool = False) -> dict[str, Any]:
    vmi = tiny_vmi()
    spec = vmi["spec"]
    boot = spec["domain"]["firmware"]["kernelBoot"]
    boot["kernelArgs"] += " kvpy.disk=vdb"
    spec["domain"]["devices"]["disks"].append({"name": "data", "disk": {"bus": "virtio"}})
    claim: dict[str, Any] = {"claimName": "mypvc"}
    if read_only:
        claim["readOnly"] = True
    spec["volumes"].append({"name": "data", "persistentVolumeClaim": claim})
    return vmi


def _start(launchers: Factory, vmi: dict[str, Any], claim_dir: Any) -> Launcher:
    launcher: Launcher = launchers(vmi, extra_args=("--claim-capacity", f"data={64 * MI}"))
    mount = launcher.private / "vmi-disks" / "data"  # where the pod mounts the claim
    mount.parent.mkdir(parents=True, exist_ok=True)
    mount.symlink_to(claim_dir)
    return launcher


async def _disk_line(launcher: Launcher) -> str:
    await call(launcher, Method.SYNC, {"vmi": launcher.vmi})

    def line() -> str | None:
        found = [x for x in launcher.serial().splitlines() if x.startswith("KUBEVIRT-PY-DISK")]
        return found[0].strip() if found else None

    result: str = await wait_for(
        line, timeout=120, interval=1, what="disk line", last=launcher.serial
    )
    return result


async def test_the_guest_writes_a_pvc_disk_that_outlives_its_launcher(
    launchers: Factory, tmp_path: Any
) -> None:
    """First launcher: disk.img made sparse at the claim's size, the guest finds nothing
    and writes 1. Second launcher on the same claim: the guest finds 1."""
    claim = tmp_path / "claim"
    claim.mkdir()
    first = _start(launchers, _pvc_vmi(), claim)
    assert await _disk_line(first) == "KUBEVIRT-PY-DISK vdb ro=0 found=0 wrote=1"
    assert (claim / "disk.img").stat().st_size == 64 * MI
    await call(first, Method.KILL)
    first.terminate()
    second = _start(launchers, _pvc_vmi(), claim)
    assert await _disk_line(second) == "KUBEVIRT-PY-DISK vdb ro=0 found=1 wrote=2"


async def test_a_read_only_claim_is_read_only_in_the_guest(
    launchers: Factory, tmp_path: Any
) -> None:
    """readOnly: the guest sees a read-only disk, its write fails, the file is unchanged."""
    claim = tmp_path / "claim"
    claim.mkdir()
    (claim / "disk.img").write_bytes(b"KVPY-COUNT 7\n".ljust(MI, b"\0"))
    launcher = _start(launchers, _pvc_vmi(read_only=True), claim)
    assert await _disk_line(launcher) == "KUBEVIRT-PY-DISK vdb ro=1 found=7 write-failed"
    assert (claim / "disk.img").read_bytes()[:13] == b"KVPY-COUNT 7\n"
