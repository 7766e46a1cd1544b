"""A launcher killed with SIGKILL on the local cluster takes its libvirtd and QEMU with it,
as a container runtime ends the whole container: the node agent ends every process of
the launcher's container when the launcher (its main process) dies."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from localkube.procs import pid_alive
from localkube.testing import wait_for
from shared.kube import PODS, KubeClient
from tests.integration.handler.cluster import HandlerProcess, pod_volume, qemu_pid
from tests.integration.handler.test_cluster import running_vmi

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def _launcher_pid(vmi_uid: str) -> int:
    """The `python -m launcher ... --uid <vmi uid>` process."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"launcher" in argv and b"-m" in argv and vmi_uid.encode() in argv:
                return int(entry.name)
    raise AssertionError(f"no launcher process for VMI {vmi_uid}")


def _pod_processes(pod_uid: str) -> list[str]:
    """Processes whose command line or environment names the pod (its dir or its UID)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not pid_alive(int(entry.name)):
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
            if pod_uid.encode() in cmdline or pod_uid.encode() in environ:
                shown = cmdline.replace(b"\0", b" ").decode(errors="replace")[:200]
                found.append(f"{entry.name}: {shown}")
    return found


async def test_sigkilled_launcher_leaves_no_libvirtd_or_qemu(
    kube: KubeClient, ns: str, cluster_node: HandlerProcess
) -> None:
    """SIGKILL the launcher of a Running VMI (booted from the tiny-guest containerDisk
    through the pod's init containers): its libvirtd and QEMU die within seconds, the pod
    is Failed with the launcher's 137, and no process of the pod is left."""
    vmi, pod_uid = await running_vmi(kube, ns, "doomed")
    qemu = qemu_pid(cluster_node, pod_uid)
    libvirtd_pidfile = pod_volume(cluster_node, pod_uid, "private") / "libvirt" / "libvirtd.pid"
    libvirtd = int(libvirtd_pidfile.read_text().split()[0])
    assert qemu is not None and pid_alive(qemu) and pid_alive(libvirtd)

    os.kill(_launcher_pid(vmi.uid or ""), signal.SIGKILL)

    async def alive() -> list[int]:
        return [pid for pid in (qemu, libvirtd) if pid_alive(pid)]

    await wait_for(alive, lambda pids: not pids, what="QEMU and libvirtd gone", timeout=30)

    async def pod() -> dict[str, Any]:
        pods = (await kube.list(PODS, namespace=ns)).items
        return dict(next(p for p in pods if p["metadata"]["uid"] == pod_uid))

    failed = await wait_for(
        pod,
        lambda p: (p.get("status") or {}).get("phase") == "Failed",
        what="the launcher pod Failed",
        timeout=30,
    )
    (compute,) = failed["status"]["containerStatuses"]
    assert compute["state"]["terminated"]["exitCode"] == 137
    assert _pod_processes(pod_uid) == []
