"""An export's source read as KubeVirt reads it: a stopped VM's claims (persistentVolumeClaim
and dataVolume volumes), a running VM or a missing one blocking with the reason, a claim
missing or unbound blocking likewise."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from controller.export.bodies import Claim
from controller.export.source import read_source
from controller.informers import build_informers
from shared.kube import PVCS, KubeClient
from shared.model import VirtualMachine, VirtualMachineInstance
from shared.model.export import VirtualMachineExport
from tests.unit.controller import builders
from tests.unit.shared.kube.fakes import FakeApi


def export(kind: str, name: str) -> VirtualMachineExport:
    group = "kubevirt.io" if kind == "VirtualMachine" else ""
    return VirtualMachineExport.from_dict(
        {"metadata": {"name": "e", "namespace": "ns"},
         "spec": {"source": {"apiGroup": group, "kind": kind, "name": name}}}
    )  # fmt: skip


def vm_with(volumes: list[dict[str, Any]]) -> VirtualMachine:
    vm = builders.make_vm(run_strategy="Halted")
    spec = dataclasses.replace(
        vm.spec.template.spec,
        volumes=VirtualMachineInstance.from_dict({"spec": {"volumes": volumes}}).spec.volumes,
    )
    template = dataclasses.replace(vm.spec.template, spec=spec)
    return dataclasses.replace(vm, spec=dataclasses.replace(vm.spec, template=template))


def rig() -> tuple[FakeApi, Any]:
    api = FakeApi()
    for name, phase in (("a", "Bound"), ("b", "Bound"), ("pending", "Pending")):
        api.seed(PVCS, {"metadata": {"name": name, "namespace": "ns"},
                        "spec": {"volumeMode": "Block" if name == "b" else "Filesystem"},
                        "status": {"phase": phase}})  # fmt: skip
    return api, build_informers(cast(KubeClient, api))


async def test_stopped_vm_exports_its_claims() -> None:
    """Both claim kinds of the VM's template, each once, Block marked."""
    api, informers = rig()
    informers.vms.store.upsert("ns/vm1", vm_with([
        {"name": "x", "persistentVolumeClaim": {"claimName": "a"}},
        {"name": "y", "dataVolume": {"name": "b"}},
        {"name": "z", "persistentVolumeClaim": {"claimName": "a"}},
    ]))  # fmt: skip
    source = await read_source(cast(KubeClient, api), informers, export("VirtualMachine", "vm1"))
    assert source.blocked is None and source.vm_name == "vm1"
    assert source.claims == (Claim(name="a"), Claim(name="b", block=True))


async def test_running_missing_or_claimless_vm_blocks() -> None:
    """A VMI of the VM running: InUse; no VM: VMNotFound; no claims: VMNoVolumes."""
    api, informers = rig()
    client = cast(KubeClient, api)
    missing = await read_source(client, informers, export("VirtualMachine", "vm1"))
    assert missing.blocked is not None and missing.blocked.reason == "VMNotFound"
    informers.vms.store.upsert("ns/vm1", vm_with([]))
    empty = await read_source(client, informers, export("VirtualMachine", "vm1"))
    assert empty.blocked is not None and empty.blocked.reason == "VMNoVolumes"
    vmi = builders.vmi_dict("vm1")
    vmi["metadata"]["namespace"] = "ns"
    vmi["status"] = {"phase": "Running"}
    informers.vmis.store.upsert("ns/vm1", VirtualMachineInstance.from_dict(vmi))
    running = await read_source(client, informers, export("VirtualMachine", "vm1"))
    assert running.blocked is not None and running.blocked.reason == "InUse"
    assert "is running" in running.blocked.message


async def test_missing_or_unbound_claim_blocks() -> None:
    """PVCNotFound and PVCPending name the claim."""
    api, informers = rig()
    client = cast(KubeClient, api)
    gone = await read_source(client, informers, export("PersistentVolumeClaim", "nope"))
    assert gone.blocked is not None and gone.blocked.reason == "PVCNotFound"
    waiting = await read_source(client, informers, export("PersistentVolumeClaim", "pending"))
    assert waiting.blocked is not None and waiting.blocked.reason == "PVCPending"
    assert "pending is Pending" in waiting.blocked.message
