"""A dead launcher is a failed VMI, on the local cluster: SIGKILL of a running VMI's launcher
process fails the VMI with reason LauncherDied (the handler sees its socket refuse, the
controller sees its pod in Error; whichever writes first, the other leaves it), and the VM
(runStrategy Always) gets a new VMI Running.

Until the process-mode node agent kills a container's other processes when its main one
dies, the killed launcher's libvirtd and QEMU outlive it: the test reaps them itself (by
the pod's environment marker and the VMI's uid) and removes the cgroups QEMU left.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from localkube.nodeagent.config import POD_ENV_MARKER
from localkube.testing import wait_for
from shared.kube import PODS, VMIS, VMS, KubeClient, NotFound
from shared.kube.api_types import WatchEventType
from shared.model import VirtualMachineInstance, VMIPhase
from tests.integration.controller.harness import ControllerProcess
from tests.integration.handler.cluster import HandlerProcess
from tests.integration.handler.leftovers import Footprint, Proc, cgroup_partitions, processes
from tests.integration.handler.test_cluster import BOOT, get_vmi, vmi_body, wait_vmi

pytestmark = [pytest.mark.integration, pytest.mark.cluster]
FAILED_WITHIN = 60.0  # a generous bound for "within seconds" on a loaded 2-core machine
RESTART = 60.0 + BOOT  # the VM's crash-loop backoff (10 s) and a second boot


def vm_body(name: str) -> dict[str, Any]:
    """A VM with runStrategy Always whose VMI is the example one, pinned to node01."""
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {
            "runStrategy": "Always",
            "template": {"metadata": {"labels": {"app": name}}, "spec": vmi_body(name)["spec"]},
        },
    }


async def test_sigkilled_launcher_fails_the_vmi_and_the_vm_runs_a_new_one(
    kube: KubeClient,
    ns: str,
    cluster_node: HandlerProcess,
    controller: ControllerProcess,
) -> None:
    """SIGKILL of the launcher process of a Running VMI: the VMI becomes Failed with reason
    LauncherDied and Ready=False naming its launcher pod, without anyone deleting it; the
    VM starts a new VMI that reaches Running."""
    await kube.create(VMS, vm_body("crashy"), namespace=ns)
    first = await wait_vmi(kube, ns, "crashy", lambda v: v.status.phase is VMIPhase.RUNNING, "Up")
    (pod_uid,) = first.status.active_pods
    pod_name = await _pod_name(kube, ns, pod_uid)
    fp = Footprint(
        vmi=first.key,
        vmi_uid=first.uid,
        pod_uid=pod_uid,
        pod_dir=cluster_node.pods_dir / pod_uid,
    )
    ours = [p.pid for p in (cluster_node.proc, controller.proc) if p is not None]
    try:
        (launcher,) = [p for p in _footprint_processes(fp, ours) if p.kind == "launcher"]
        watch = asyncio.ensure_future(_until_final(kube, first))
        try:
            os.kill(launcher.pid, signal.SIGKILL)
            failed = await asyncio.wait_for(watch, FAILED_WITHIN)
        except TimeoutError:
            now = (await get_vmi(kube, ns, "crashy")).to_dict().get("status")
            raise AssertionError(f"not final {FAILED_WITHIN}s after SIGKILL: {now}") from None
        finally:
            watch.cancel()
        await _reap(fp, ours)  # the dead launcher's libvirtd and QEMU (module docstring)
        assert failed.status.phase is VMIPhase.FAILED, failed.to_dict().get("status")
        assert failed.status.reason == "LauncherDied"
        ready = failed.status.condition("Ready")
        assert ready is not None and ready.status == "False"
        assert pod_uid in (ready.message or "") or pod_name in (ready.message or "")
        second = await wait_vmi(
            kube,
            ns,
            "crashy",
            lambda v: v.uid != first.uid and v.status.phase is VMIPhase.RUNNING,
            "a new VMI Running",
            timeout=RESTART,
        )
        assert second.status.condition_is_true("Ready")
        await _reap(fp, ours)
        assert not cgroup_partitions(fp.vmi_uid), "the killed QEMU's cgroups are left"
    finally:
        await _reap(fp, ours)
        with contextlib.suppress(NotFound):
            await kube.delete(VMS, "crashy", namespace=ns)
        await wait_for(
            lambda: _vmi_or_none(kube, ns, "crashy"), lambda v: v is None, what="VMIs gone"
        )


async def _until_final(kube: KubeClient, vmi: VirtualMachineInstance) -> VirtualMachineInstance:
    """Watch the VMI from its version until it is final (the VM deletes a Failed VMI at
    once, so polling could miss the Failed state)."""
    rv = vmi.metadata.resource_version
    while True:
        stream = kube.watch(
            VMIS,
            namespace=vmi.namespace,
            field_selector=f"metadata.name={vmi.name}",
            resource_version=rv,
            timeout_seconds=30,
        )
        async with contextlib.aclosing(stream) as events:
            async for event in events:
                rv = event.resource_version or rv
                if event.type not in (WatchEventType.ADDED, WatchEventType.MODIFIED):
                    continue
                seen = VirtualMachineInstance.from_dict(event.object)
                if seen.uid == vmi.uid and seen.is_final():
                    return seen


def _footprint_processes(fp: Footprint, exclude: Iterable[int]) -> list[Proc]:
    """The pod's processes (launcher, tini, libvirtd: the node agent's marker in their
    environment) and QEMU (the VMI uid on its command line)."""
    return processes(
        cmdline=(fp.vmi_uid, f"{fp.pod_dir}/"),
        env=(f"{POD_ENV_MARKER}={fp.pod_uid}",),
        exclude=exclude,
    )


async def _reap(fp: Footprint, exclude: Iterable[int]) -> None:
    """SIGKILL what the pod left running, wait until it is gone, then remove the cgroups
    QEMU left behind."""

    async def survivors() -> list[Proc]:
        found = _footprint_processes(fp, exclude)
        for proc in found:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
        return found

    await wait_for(survivors, lambda left: not left, what=f"{fp.vmi}'s processes reaped")
    for partition in cgroup_partitions(fp.vmi_uid):
        _rmdir_tree(partition)


def _rmdir_tree(root: Path) -> None:
    """cgroup directories bottom-up (their files are not removable: rmdir only). The
    handler sweeps the same partitions once it forgets the VMI, so any of them may vanish
    meanwhile: os.walk skips a directory it can no longer list."""
    for sub, _, _ in os.walk(root, topdown=False):
        with contextlib.suppress(OSError):  # busy while a killed process is being reaped
            os.rmdir(sub)


async def _pod_name(kube: KubeClient, ns: str, uid: str) -> str:
    pods = (await kube.list(PODS, namespace=ns)).items
    return str(next(p["metadata"]["name"] for p in pods if p["metadata"]["uid"] == uid))


async def _vmi_or_none(kube: KubeClient, ns: str, name: str) -> VirtualMachineInstance | None:
    try:
        return await get_vmi(kube, ns, name)
    except NotFound:
        return None
