"""The VM's persistent-state claim (controller/vmi/vmstate.py): made before the launcher
pod of a VMI with a persistent TPM or EFI, `persistent-state-for-<vm>` of the KubeVirt CR's
vmStateStorageClass, ReadWriteMany, owned by the VM (deleted with it by the garbage
collector); an existing claim is kept; without a class no pod is made and the VMI says
why; the pod mounts the claim."""

from __future__ import annotations

from typing import Any

import pytest

from controller.config import TemplateConfig
from controller.errors import SyncError
from controller.services.template import TemplateService
from controller.vmi.vmstate import claim_body
from shared import vmstate
from shared.kube import PVCS
from shared.model import VirtualMachineInstance
from tests.unit.controller.builders import vmi_dict
from tests.unit.controller.vmi.test_controller import KEY, Rig

VM_UID = "aaaaaaaa-0000-0000-0000-000000000001"
CLASS = "shared-storage"


def _persistent(*, tpm: bool = True, efi: bool = False, owned: bool = True) -> dict[str, Any]:
    raw = vmi_dict()
    if tpm:
        raw["spec"]["domain"]["devices"]["tpm"] = {"persistent": True}
    if efi:
        efi_spec = {"persistent": True, "secureBoot": False}
        raw["spec"]["domain"]["firmware"] = {"bootloader": {"efi": efi_spec}}
    if owned:
        raw["metadata"]["ownerReferences"] = [
            {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": "vm1",
             "uid": VM_UID, "controller": True, "blockOwnerDeletion": True}
        ]  # fmt: skip
    return raw


def _rig(storage_class: str | None = CLASS) -> Rig:
    rig = Rig()
    service = TemplateService(TemplateConfig(vm_state_storage_class=storage_class))
    rig.ctl._templates_of = lambda: service
    return rig


def _objects(rig: Rig, plural: str) -> list[dict[str, Any]]:
    return [o for (p, _), o in rig.api.objects.items() if p == plural]


@pytest.mark.parametrize(
    ("tpm", "efi"),
    [
        pytest.param(True, False, id="tpm"),
        pytest.param(False, True, id="efi"),
        pytest.param(True, True, id="both"),
    ],
)
async def test_the_state_claim_is_made_before_the_pod_which_mounts_it(tpm: bool, efi: bool) -> None:
    """A persistent TPM or EFI: the claim persistent-state-for-vm1 (10Mi, RWX, Filesystem,
    the configured class, labelled with the VM's name, owned by the VM) exists, and the
    launcher pod mounts it at the state dir."""
    rig = _rig()
    rig.seed_vmi(_persistent(tpm=tpm, efi=efi))
    await rig.ctl.sync(KEY)
    (claim,) = _objects(rig, "persistentvolumeclaims")
    assert claim["metadata"]["name"] == "persistent-state-for-vm1"
    assert claim["metadata"]["labels"] == {"persistent-state-for": "vm1"}
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("VirtualMachine", "vm1", VM_UID)
    assert claim["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "volumeMode": "Filesystem",
        "storageClassName": CLASS,
        "resources": {"requests": {"storage": "10Mi"}},
    }
    (pod,) = _objects(rig, "pods")
    volume = {
        "name": "vm-state",
        "persistentVolumeClaim": {"claimName": "persistent-state-for-vm1"},
    }
    assert volume in pod["spec"]["volumes"]
    mount = {"name": "vm-state", "mountPath": "/var/run/kubevirt-private/vm-state"}
    assert mount in pod["spec"]["containers"][0]["volumeMounts"]


async def test_an_existing_claim_is_kept_as_it_is() -> None:
    """A restart finds the VM's claim: it is not made again nor changed (its state is the
    VM's), and the pod mounts it."""
    rig = _rig()
    existing = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "persistent-state-for-vm1", "namespace": "ns"},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "old"}}  # fmt: skip
    rig.api.seed(PVCS, existing)
    rig.seed_vmi(_persistent())
    await rig.ctl.sync(KEY)
    (claim,) = _objects(rig, "persistentvolumeclaims")
    assert claim["spec"] == existing["spec"]
    assert len(_objects(rig, "pods")) == 1


async def test_the_handoff_describes_the_state_claim_under_its_name() -> None:
    """From the handoff on, volumeStatus has an entry named after the state claim with its
    bound access modes (as KubeVirt lists it; the handler's LiveMigratable reads it)."""
    rig = _rig()
    rig.seed_vmi(_persistent())
    await rig.ctl.sync(KEY)
    stored = rig.api.objects[("persistentvolumeclaims", "ns/persistent-state-for-vm1")]
    stored["status"] = {"phase": "Bound", "accessModes": ["ReadWriteMany"],
                        "capacity": {"storage": "1Gi"}}  # fmt: skip
    rig.observe_pods(phase="Running")
    await rig.ctl.sync(KEY)
    entry = rig.stored_vmi().status.volume_state("persistent-state-for-vm1")
    assert entry is not None and entry.persistent_volume_claim_info is not None
    info = entry.persistent_volume_claim_info
    assert (info.claim_name, info.access_modes) == ("persistent-state-for-vm1",
                                                    ("ReadWriteMany",))  # fmt: skip


async def test_no_class_makes_no_pod_and_says_why() -> None:
    """Without vmStateStorageClass (the CR changed after admission): no claim, no pod, and
    Synchronized=False naming the CR's field."""
    rig = _rig(storage_class=None)
    rig.seed_vmi(_persistent())
    with pytest.raises(SyncError):
        await rig.ctl.sync(KEY)
    assert _objects(rig, "persistentvolumeclaims") == [] and _objects(rig, "pods") == []
    cond = rig.stored_vmi().status.condition("Synchronized")
    assert cond is not None and cond.reason == "FailedPersistentStateClaim"
    assert "spec.configuration.vmStateStorageClass" in (cond.message or "")


async def test_no_persistent_state_no_claim() -> None:
    """A non-persistent TPM makes no claim and mounts none."""
    rig = _rig()
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"]["tpm"] = {}
    rig.seed_vmi(raw)
    await rig.ctl.sync(KEY)
    assert _objects(rig, "persistentvolumeclaims") == []
    (pod,) = _objects(rig, "pods")
    assert all(v["name"] != "vm-state" for v in pod["spec"]["volumes"])


def test_a_vmi_without_a_vm_owns_its_claim() -> None:
    """A VMI no VM controls owns its own claim (it goes with the VMI, as in KubeVirt)."""
    vmi = VirtualMachineInstance.from_dict(_persistent(owned=False))
    body = claim_body(vmi, storage_class=CLASS)
    assert body is not None
    (owner,) = body["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("VirtualMachineInstance",
                                                                   "vm1", True)  # fmt: skip


def test_long_vm_names_are_cut_to_a_valid_claim_name() -> None:
    """A VM name too long for the prefix gives a 63-character name ending in a hash, the
    same for the same VM and different for another."""
    long = "v" * 60
    name = vmstate.claim_name(long)
    assert len(name) == 63 and name.startswith("persistent-state-for-vvv")
    assert name == vmstate.claim_name(long) != vmstate.claim_name(long + "x")
    assert vmstate.claim_name("vm1") == "persistent-state-for-vm1"
