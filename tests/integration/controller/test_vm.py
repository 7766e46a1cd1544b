"""VM controller against the cluster: run strategies, start/stop/restart requests, crash-loop
backoff and printableStatus. The test plays the handler where a phase past Scheduled is
needed (it writes the VMI's status as the handler would)."""

from __future__ import annotations

from typing import Any

import pytest

from localkube.testing import wait_for
from shared.kube import VMIS, VMS, KubeClient, NotFound
from shared.model import VirtualMachine, VirtualMachineInstance
from tests.integration.controller.harness import (
    ControllerProcess,
    get_vmi,
    patch_status,
    vmi_body,
    wait_gone,
    wait_phase,
)

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture
def controller_args() -> list[str]:
    """A short crash-loop backoff so the test sees a retry."""
    return ["--start-backoff-base", "3", "--start-backoff-max", "6"]


def vm_body(name: str, strategy: str) -> dict[str, Any]:
    template = vmi_body(name)
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {
            "runStrategy": strategy,
            "template": {"metadata": {"labels": {"app": name}}, "spec": template["spec"]},
        },
    }


async def get_vm(kube: KubeClient, ns: str, name: str) -> VirtualMachine:
    return VirtualMachine.from_dict(await kube.get(VMS, name, namespace=ns))


async def wait_printable(kube: KubeClient, ns: str, name: str, printable: str) -> VirtualMachine:
    return await wait_for(
        lambda: get_vm(kube, ns, name),
        lambda vm: vm.status.printable_status == printable,
        what=f"VM {name} {printable}",
        timeout=90,
        show=lambda vm: vm.to_dict().get("status"),
    )


async def play_handler(kube: KubeClient, ns: str, name: str, phase: str) -> None:
    """Write the phase (and Ready while Running) as the handler would."""
    ready = "True" if phase == "Running" else "False"
    await patch_status(
        kube, VMIS, ns, name, {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}
    )


async def vmi_or_none(kube: KubeClient, ns: str, name: str) -> VirtualMachineInstance | None:
    try:
        return await get_vmi(kube, ns, name)
    except NotFound:
        return None


async def test_always_creates_an_owned_vmi_and_mirrors_it(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """Always: the VMI is created from the template (owned, labelled); the VM goes
    Starting → Running with Ready mirrored once the VMI runs."""
    vm = VirtualMachine.from_dict(await kube.create(VMS, vm_body("vm1", "Always"), namespace=ns))
    vmi = await wait_phase(kube, ns, "vm1", "Scheduled")
    ref = vmi.metadata.controller_ref()
    assert ref is not None and ref.uid == vm.uid and ref.kind == "VirtualMachine"
    assert vmi.metadata.labels == {
        "app": "vm1",
        "kubevirt.io/vm": "vm1",
        "kubevirt.io/nodeName": vmi.status.node_name,
    }
    starting = await wait_printable(kube, ns, "vm1", "Starting")
    assert starting.status.created is True
    await play_handler(kube, ns, "vm1", "Running")
    running = await wait_printable(kube, ns, "vm1", "Running")
    assert running.status.ready is True
    ready = running.status.condition("Ready")
    assert ready is not None and ready.status == "True"
    assert running.status.observed_generation == running.metadata.generation


async def test_switching_to_halted_deletes_the_vmi(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """Always → Halted: the VMI is deleted and the VM shows Stopped."""
    await kube.create(VMS, vm_body("vm2", "Always"), namespace=ns)
    await wait_phase(kube, ns, "vm2", "Scheduled")
    await kube.patch(VMS, "vm2", {"spec": {"runStrategy": "Halted"}}, namespace=ns)
    await wait_gone(kube, VMIS, ns, "vm2")
    vm = await wait_printable(kube, ns, "vm2", "Stopped")
    assert vm.status.created is None


async def test_manual_start_stop_and_restart_requests(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """Manual: nothing until a Start request; Stop{uid} deletes; [Stop, Start] restarts."""
    await kube.create(VMS, vm_body("vm3", "Manual"), namespace=ns)
    await wait_printable(kube, ns, "vm3", "Stopped")
    assert await vmi_or_none(kube, ns, "vm3") is None
    await patch_status(kube, VMS, ns, "vm3", {"stateChangeRequests": [{"action": "Start"}]})
    first = await wait_phase(kube, ns, "vm3", "Scheduled")
    vm = await wait_for(
        lambda: get_vm(kube, ns, "vm3"),
        lambda v: not v.status.state_change_requests,
        what="Start request consumed",
    )
    assert vm.status.created is True
    restart = [{"action": "Stop", "uid": first.uid}, {"action": "Start"}]
    await patch_status(kube, VMS, ns, "vm3", {"stateChangeRequests": restart})
    second = await wait_for(
        lambda: get_vmi(kube, ns, "vm3"),
        lambda v: v.uid != first.uid and v.status.phase == "Scheduled",
        what="a new VMI after restart",
        timeout=90,
    )
    await patch_status(
        kube, VMS, ns, "vm3", {"stateChangeRequests": [{"action": "Stop", "uid": second.uid}]}
    )
    await wait_gone(kube, VMIS, ns, "vm3")
    await wait_printable(kube, ns, "vm3", "Stopped")


async def test_rerun_on_failure_backs_off_then_recreates(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """RerunOnFailure: a Failed VMI is counted, the VM shows CrashLoopBackOff, and a new
    VMI is created once the backoff has passed."""
    await kube.create(VMS, vm_body("vm4", "RerunOnFailure"), namespace=ns)
    first = await wait_phase(kube, ns, "vm4", "Scheduled")
    await play_handler(kube, ns, "vm4", "Failed")
    looping = await wait_printable(kube, ns, "vm4", "CrashLoopBackOff")
    failure = looping.status.start_failure
    assert failure is not None and failure.consecutive_fail_count == 1
    assert failure.last_failed_vmi_uid == first.uid
    second = await wait_for(
        lambda: get_vmi(kube, ns, "vm4"),
        lambda v: v.uid != first.uid,
        what="VMI recreated after backoff",
        timeout=60,
    )
    await wait_phase(kube, ns, "vm4", "Scheduled")
    assert second.uid != first.uid


async def test_once_does_not_restart_a_finished_vmi(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """Once: created once; when it succeeds it stays, and the VM shows Stopped."""
    await kube.create(VMS, vm_body("vm5", "Once"), namespace=ns)
    first = await wait_phase(kube, ns, "vm5", "Scheduled")
    await play_handler(kube, ns, "vm5", "Succeeded")
    await wait_printable(kube, ns, "vm5", "Stopped")
    vmi = await get_vmi(kube, ns, "vm5")
    assert vmi.uid == first.uid and vmi.status.phase == "Succeeded"


async def test_vm_deletion_takes_the_vmi(
    kube: KubeClient, ns: str, controller: ControllerProcess
) -> None:
    """Deleting the VM removes its VMI too."""
    await kube.create(VMS, vm_body("vm6", "Always"), namespace=ns)
    await wait_phase(kube, ns, "vm6", "Scheduled")
    await kube.delete(VMS, "vm6", namespace=ns)
    await wait_gone(kube, VMIS, ns, "vm6")
