"""A VM naming an instancetype and a preference, against the cluster (process-mode nodes):
the VMI the controller creates has the instancetype's CPU and memory and the preference's
disk bus, interface model and machine type; both objects are captured in
ControllerRevisions the VM names, so editing the instancetype leaves the VM's next VMI
as it was."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from localkube.testing import wait_for
from shared.expansion import CONTROLLER_REVISIONS, RESOURCES
from shared.kube import VMIS, VMS, KubeClient, NotFound
from shared.model import VirtualMachine
from tests.integration.controller.harness import ControllerProcess, wait_phase

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

IT_KIND = "VirtualMachineInstancetype"
PREF_KIND = "VirtualMachineClusterPreference"


@pytest.fixture
async def preference(kube: KubeClient) -> AsyncIterator[str]:
    """A cluster-wide preference for this test (cluster-scoped: removed afterwards)."""
    name = f"pref-{uuid.uuid4().hex[:6]}"
    body = {
        "apiVersion": "instancetype.kubevirt.io/v1beta1",
        "kind": PREF_KIND,
        "metadata": {"name": name},
        "spec": {
            "devices": {"preferredDiskBus": "sata", "preferredInterfaceModel": "e1000"},
            "machine": {"preferredMachineType": "q35"},
        },
    }
    await kube.create(RESOURCES[PREF_KIND], body)
    yield name
    await kube.delete(RESOURCES[PREF_KIND], name)


def vm_body(name: str, preference: str) -> dict[str, Any]:
    spec = {
        "domain": {  # no CPU request: the instancetype owns it (KubeVirt's conflict)
            "devices": {
                "disks": [{"name": "scratch"}],
                "interfaces": [{"name": "default", "masquerade": {}}],
            },
        },
        "networks": [{"name": "default", "pod": {}}],
        "volumes": [{"name": "scratch", "emptyDisk": {"capacity": "16Mi"}}],
        "terminationGracePeriodSeconds": 0,
    }
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": name},
        "spec": {
            "runStrategy": "Always",
            "instancetype": {"name": "small", "kind": IT_KIND},
            "preference": {"name": preference},
            "template": {"spec": spec},
        },
    }


async def test_vm_gets_the_instancetype_and_preference(
    kube: KubeClient, ns: str, preference: str, controller: ControllerProcess
) -> None:
    """CPU and memory from the instancetype, bus/model/machine from the preference, both
    captured in revisions; an edited instancetype does not reach the recreated VMI."""
    instancetype = {
        "apiVersion": "instancetype.kubevirt.io/v1beta1",
        "kind": IT_KIND,
        "metadata": {"name": "small"},
        "spec": {"cpu": {"guest": 2}, "memory": {"guest": "48Mi"}},
    }
    await kube.create(RESOURCES[IT_KIND], instancetype, namespace=ns)
    await kube.create(VMS, vm_body("vm1", preference), namespace=ns)
    vmi = await wait_phase(kube, ns, "vm1", "Scheduled")
    domain = vmi.spec.domain
    assert (domain.cpu.sockets, domain.cpu.cores, domain.cpu.threads) == (2, 1, 1)
    assert domain.memory.guest == "48Mi"
    assert domain.devices.disks[0].bus == "sata"
    assert domain.devices.interfaces[0].model == "e1000"
    assert domain.machine.type == "q35"

    vm = VirtualMachine.from_dict(await kube.get(VMS, "vm1", namespace=ns))
    assert vm.spec.instancetype is not None and vm.spec.preference is not None
    for matcher in (vm.spec.instancetype, vm.spec.preference):
        assert matcher.revision_name, vm.to_dict()["spec"]
        rev = await kube.get(CONTROLLER_REVISIONS, matcher.revision_name, namespace=ns)
        assert rev["metadata"]["ownerReferences"][0]["uid"] == vm.uid

    # Edit the instancetype, then restart the VM: its next VMI keeps the captured sizing.
    await kube.patch(
        RESOURCES[IT_KIND], "small", {"spec": {"memory": {"guest": "64Mi"}}}, namespace=ns
    )
    old_uid = vmi.uid
    await kube.delete(VMIS, "vm1", namespace=ns)

    async def current() -> Any:
        try:
            return await kube.get(VMIS, "vm1", namespace=ns)
        except NotFound:
            return None

    again = await wait_for(
        current,
        lambda v: v is not None and v["metadata"]["uid"] != old_uid,
        what="a new VMI vm1",
        timeout=60,
    )
    assert again["spec"]["domain"]["memory"]["guest"] == "48Mi"
