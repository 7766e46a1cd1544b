"""An image the kubelet cannot get (a containerDisk or kernelBoot image, mounted as an image
volume or copied out by the launcher pod's init containers) shows on the VMI as Synchronized=False naming the VMI field,
and on the VM as printableStatus ErrImagePull / ImagePullBackOff, as KubeVirt shows it."""

from __future__ import annotations

from typing import Any

import pytest

from controller.vm.logic import plan_vm
from controller.vmi.logic import plan_vmi
from shared import podlayout
from shared.launcherpod import decode_pod
from shared.model import PrintableStatus, VirtualMachineInstance, VMIConditionType, VMIPhase
from tests.unit.controller.builders import NOW, make_vm, make_vmi, pod_dict, vmi_dict
from tests.unit.controller.vm.test_logic import BACKOFF


def _vmi() -> VirtualMachineInstance:
    raw = vmi_dict()
    raw["spec"]["volumes"] = [
        {"name": "cloudinit", "cloudInitNoCloud": {"userData": "#cloud-config"}},
        {"name": "root", "containerDisk": {"image": "registry.local/missing:v1"}},
    ]
    raw["spec"]["domain"]["devices"]["disks"] = [{"name": "root", "disk": {"bus": "virtio"}}]
    return make_vmi(phase=VMIPhase.SCHEDULING, raw=raw)


def _pod(reason: str, container: str) -> dict[str, Any]:
    pod = pod_dict(node="node01")
    pod["status"]["initContainerStatuses"] = [
        {"name": podlayout.BINARY_INIT_CONTAINER, "state": {"terminated": {"exitCode": 0}}},
        {
            "name": container,
            "image": "registry.local/missing:v1",
            "state": {"waiting": {"reason": reason, "message": "pull access denied"}},
        },
    ]
    return pod


def test_an_image_volume_pull_failure_names_the_field_its_message_quotes() -> None:
    """An image volume's failed pull waits on the compute container, quoting the image:
    the condition names the containerDisk field and that image, not the launcher's."""
    pod = pod_dict(node="node01")
    message = 'Container image "registry.local/missing:v1" is not present with pull policy of Never'
    pod["status"]["containerStatuses"] = [{
        "name": "compute", "image": "registry.local/kubevirt-py/virt-launcher:dev",
        "state": {"waiting": {"reason": "ErrImageNeverPull", "message": message}},
    }]  # fmt: skip
    p = plan_vmi(_vmi(), [decode_pod(pod)], now=NOW, unschedulable_timeout=60)
    cond = p.status.condition(VMIConditionType.SYNCHRONIZED)
    assert cond is not None and cond.reason == "ErrImageNeverPull"
    assert cond.message == (
        f"spec.volumes[1].containerDisk.image: image 'registry.local/missing:v1': {message}"
    )


@pytest.mark.parametrize(
    ("container", "field"),
    [
        pytest.param(podlayout.volume_init_container("root"), "spec.volumes[1].containerDisk.image", id="containerdisk"),
        pytest.param(podlayout.KERNEL_BOOT_INIT_CONTAINER, "spec.domain.firmware.kernelBoot.container.image", id="kernelboot"),
    ],
)  # fmt: skip
def test_image_pull_failure_names_the_field(container: str, field: str) -> None:
    """ErrImagePull on a copying init container: Synchronized=False/ErrImagePull whose
    message names the VMI field and the image."""
    pod = decode_pod(_pod("ErrImagePull", container))
    p = plan_vmi(_vmi(), [pod], now=NOW, unschedulable_timeout=60)
    cond = p.status.condition(VMIConditionType.SYNCHRONIZED)
    assert cond is not None and cond.status == "False" and cond.reason == "ErrImagePull"
    assert cond.message is not None and cond.message.startswith(field)
    assert "registry.local/missing:v1" in cond.message and "pull access denied" in cond.message
    assert p.status.phase == VMIPhase.SCHEDULING


def test_condition_goes_once_the_image_is_there() -> None:
    """When the pod no longer waits for an image, the condition is dropped."""
    waiting = decode_pod(_pod("ImagePullBackOff", podlayout.volume_init_container("root")))
    held = plan_vmi(_vmi(), [waiting], now=NOW, unschedulable_timeout=60).status
    vmi = make_vmi(phase=VMIPhase.SCHEDULING, raw=_vmi().to_dict() | {"status": held.to_dict()})
    fine = plan_vmi(vmi, [decode_pod(pod_dict(node="node01"))], now=NOW, unschedulable_timeout=60)
    assert fine.status.condition(VMIConditionType.SYNCHRONIZED) is None


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        ("ErrImagePull", PrintableStatus.ERR_IMAGE_PULL),
        ("ImagePullBackOff", PrintableStatus.IMAGE_PULL_BACK_OFF),
        ("ErrImageNeverPull", PrintableStatus.ERR_IMAGE_PULL),
    ],
)
def test_vm_shows_the_pull_failure(reason: str, shown: PrintableStatus) -> None:
    """`kubectl get vm` shows ErrImagePull / ImagePullBackOff while the VMI waits."""
    pod = decode_pod(_pod(reason, podlayout.volume_init_container("root")))
    status = plan_vmi(_vmi(), [pod], now=NOW, unschedulable_timeout=60).status
    raw = _vmi().to_dict() | {"status": status.to_dict()}
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": "vm1",
         "uid": make_vm().uid, "controller": True}
    ]  # fmt: skip
    vmi = VirtualMachineInstance.from_dict(raw)
    assert plan_vm(make_vm(), vmi, now=NOW, backoff=BACKOFF).status.printable_status == shown
