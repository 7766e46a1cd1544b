"""What the node agent does with a container as a runtime would: a data image (a
containerDisk image from the local store, files and no program) runs its container's
command chrooted into a read-only view of the image, so the launcher pod's init
containers can copy disks out of it; and when a container's main process dies, every
process it started dies too, even those that left its process group and environment."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from kubernetes_asyncio import client

from localkube.imagestore import ImageStore, default_root
from localkube.procs import pid_alive
from localkube.testing import wait_for
from shared import podlayout
from tests.integration.launcher.conftest import guest

pytestmark = pytest.mark.cluster
__all__ = ["guest"]
GUEST = "registry.local/kubevirt-py/tiny-guest:v1"
LAUNCHER = "registry.local/kubevirt-py/virt-launcher:dev"


def _pod(name: str, *, init: list[dict[str, Any]], main: dict[str, Any], out: Path) -> Any:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 2,
            "initContainers": init,
            "containers": [main],
            "volumes": [
                {"name": podlayout.BINARY_VOLUME, "emptyDir": {}},
                {"name": "out", "hostPath": {"path": str(out), "type": "Directory"}},
            ],
        },
    }


def _mounts() -> list[dict[str, Any]]:
    return [
        {"name": podlayout.BINARY_VOLUME, "mountPath": podlayout.BINARY_DIR, "readOnly": True},
        {"name": "out", "mountPath": podlayout.CONTAINER_DISKS_DIR},
    ]


async def _phase(core: client.CoreV1Api, name: str, ns: str) -> client.V1Pod:
    return await core.read_namespaced_pod(name, ns)


def _summary(pod: client.V1Pod) -> Any:
    statuses = [*(pod.status.init_container_statuses or ()), *(pod.status.container_statuses or ())]
    return {"phase": pod.status.phase, "containers": [s.to_dict() for s in statuses]}


async def test_data_image_init_containers_copy_files_out_of_a_read_only_image(
    kube_api: client.ApiClient, kube_namespace: str, tmp_path: Path, guest: Path
) -> None:
    """busybox from the launcher image, then the tiny-guest image (no shell of its own)
    runs podlayout's copy with it: the one file under /disk and the kernel come out
    byte for byte; writing into the image's root fails, and the store is untouched."""
    out = tmp_path / "out"
    out.mkdir()
    store = ImageStore(default_root(os.environ))
    binary = {
        "name": podlayout.BINARY_INIT_CONTAINER,
        "image": LAUNCHER,
        "command": ["/bin/busybox", "cp", "/bin/busybox", podlayout.BUSYBOX],
        "volumeMounts": [{"name": podlayout.BINARY_VOLUME, "mountPath": podlayout.BINARY_DIR}],
    }
    files = [
        podlayout.CopyFile(source=None, name=podlayout.DISK_FILE),
        podlayout.CopyFile(source="/boot/vmlinuz", name=podlayout.KERNEL_FILE),
    ]
    copy = {
        "name": "volumecontainerdisk",
        "image": GUEST,
        "command": podlayout.copy_command(PurePosixPath("containerdisk"), files),
        "volumeMounts": _mounts(),
    }
    probe = f"if touch /boot/written; then echo writable; else echo read-only; fi > {podlayout.CONTAINER_DISKS_DIR}/root"
    main = {
        "name": "main",
        "image": GUEST,
        "command": [podlayout.BUSYBOX, "sh", "-c", probe],
        "volumeMounts": _mounts(),
    }
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod(
        kube_namespace, _pod("copy", init=[binary, copy], main=main, out=out)
    )
    pod = await wait_for(
        lambda: _phase(core, "copy", kube_namespace),
        lambda p: p.status.phase in ("Succeeded", "Failed"),
        what="the copy pod done",
        timeout=60,
        show=_summary,
    )
    assert pod.status.phase == "Succeeded", _summary(pod)
    copied = out / "containerdisk"
    assert sorted(p.name for p in copied.iterdir()) == ["disk", "kernel"]
    assert (copied / "disk").read_bytes() == store.disk(GUEST, None).read_bytes()
    assert (copied / "kernel").read_bytes() == store.file(GUEST, "/boot/vmlinuz").read_bytes()
    assert (out / "root").read_text().strip() == "read-only"
    assert not (store.rootfs(GUEST) / "boot" / "written").exists()


# Starts a grandchild that leaves the container's session and environment (as libvirtd
# starts QEMU), records both pids, then waits to be killed.
ESCAPE = """
import os, pathlib, subprocess, sys, time
child = subprocess.Popen(["sleep", "1000"], start_new_session=True, env={}, close_fds=True)
out = pathlib.Path(sys.argv[1])
(out / "pids.tmp").write_text(f"{os.getpid()} {child.pid}")
(out / "pids.tmp").rename(out / "pids")
time.sleep(1000)
"""


async def test_processes_of_a_container_die_with_its_main_process(
    kube_api: client.ApiClient, kube_namespace: str, tmp_path: Path
) -> None:
    """SIGKILL of a container's main process ends a grandchild that left its session and
    environment (what the agent failed to do for a launcher's libvirtd and QEMU): the pod
    is Failed with exit code 137 and nothing of the container is left."""
    out = tmp_path / "out"
    out.mkdir()
    main = {
        "name": "main",
        "image": "kubevirt-py/python",
        "command": ["python", "-c", ESCAPE, str(out)],
        "volumeMounts": [{"name": "out", "mountPath": str(out)}],
    }
    body = _pod("escape", init=[], main=main, out=out)
    body["spec"]["volumes"] = body["spec"]["volumes"][1:]
    core = client.CoreV1Api(kube_api)
    await core.create_namespaced_pod(kube_namespace, body)

    async def pids() -> str:
        return (out / "pids").read_text() if (out / "pids").exists() else ""

    recorded = await wait_for(pids, bool, what="the container's pids", timeout=60)
    main_pid, child_pid = (int(p) for p in recorded.split())
    assert pid_alive(child_pid)
    assert os.getsid(child_pid) != os.getsid(main_pid)
    os.kill(main_pid, signal.SIGKILL)
    pod = await wait_for(
        lambda: _phase(core, "escape", kube_namespace),
        lambda p: p.status.phase == "Failed",
        what="the pod Failed",
        timeout=60,
        show=_summary,
    )
    assert pod.status.container_statuses[0].state.terminated.exit_code == 137
    assert not pid_alive(child_pid), subprocess.run(
        ["ps", "-o", "pid,sess,cmd", "-p", str(child_pid)], capture_output=True, text=True
    ).stdout
