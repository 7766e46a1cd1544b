"""KubeVirt's defaults as admission applies them: pure dict → defaulted dict → JSONPatch."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import VirtualMachineInstance
from shared.model.validation import validate_vmi
from virt_api.admission.defaults import Defaults, default_vmi_spec, mutate

DEFAULTS = Defaults(machine_type="pc")


def apply_patch(obj: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 add/replace of top-level members (all the mutator emits)."""
    out = dict(obj)
    for op in patch:
        assert op["op"] in ("add", "replace") and op["path"].count("/") == 1
        key = op["path"][1:]
        assert (key in out) == (op["op"] == "replace")
        out[key] = op["value"]
    return out


def demo_vmi() -> dict[str, Any]:
    """examples/vm-demo.yaml's guest as a VMI, without any disk (KubeVirt adds them)."""
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "tiny", "namespace": "default"},
        "spec": {
            "domain": {
                "memory": {"guest": "128Mi"},
                "firmware": {
                    "kernelBoot": {
                        "container": {"image": "registry.local/kubevirt-py/tiny-guest:v1",
                                      "kernelPath": "/boot/vmlinuz"},
                    }
                },
            },
            "volumes": [
                {"name": "containerdisk",
                 "containerDisk": {"image": "registry.local/kubevirt-py/tiny-guest:v1"}},
            ],
        },
    }  # fmt: skip


def test_a_volume_without_a_disk_gets_one() -> None:
    """Each volume without a disk of its name gets a virtio disk; the result is valid."""
    spec = default_vmi_spec(demo_vmi()["spec"], DEFAULTS)
    assert spec["domain"]["devices"]["disks"] == [
        {"name": "containerdisk", "disk": {"bus": "virtio"}}
    ]
    vmi = VirtualMachineInstance.from_dict({**demo_vmi(), "spec": spec})
    assert validate_vmi(vmi) == []


def test_an_acpi_table_volume_gets_no_disk() -> None:
    """The Secret volume firmware.acpi.slicNameRef names is a table, not a disk: no disk is
    added for it (the other volumes still get theirs), and the result is valid."""
    vmi = demo_vmi()
    vmi["spec"]["domain"]["firmware"]["acpi"] = {"slicNameRef": "slic"}
    vmi["spec"]["volumes"].append({"name": "slic", "secret": {"secretName": "oem"}})
    spec = default_vmi_spec(vmi["spec"], DEFAULTS)
    assert [d["name"] for d in spec["domain"]["devices"]["disks"]] == ["containerdisk"]
    assert validate_vmi(VirtualMachineInstance.from_dict({**vmi, "spec": spec})) == []
    plain = default_vmi_spec(demo_vmi()["spec"], DEFAULTS)
    assert "acpi" not in plain["domain"]["firmware"]  # nothing created by the lookup


def test_pod_network_and_masquerade_when_none() -> None:
    """No interfaces and no networks: the pod network with a masquerade interface."""
    spec = default_vmi_spec(demo_vmi()["spec"], DEFAULTS)
    assert spec["networks"] == [{"name": "default", "pod": {}}]
    assert spec["domain"]["devices"]["interfaces"] == [{"name": "default", "masquerade": {}}]


def test_no_pod_network_when_autoattach_is_false() -> None:
    """autoattachPodInterface: false is honoured: no network is added."""
    raw = demo_vmi()["spec"]
    raw["domain"]["devices"] = {"autoattachPodInterface": False}
    spec = default_vmi_spec(raw, DEFAULTS)
    assert "networks" not in spec and "interfaces" not in spec["domain"]["devices"]


def test_machine_memory_cpu_grace() -> None:
    """Machine type, requests.memory from guest memory, topology of 1s, 30 s grace."""
    spec = default_vmi_spec(demo_vmi()["spec"], DEFAULTS)
    domain = spec["domain"]
    assert domain["machine"] == {"type": "pc"}
    assert domain["resources"] == {"requests": {"memory": "128Mi"}}
    assert domain["cpu"] == {"sockets": 1, "cores": 1, "threads": 1}
    assert spec["terminationGracePeriodSeconds"] == 30


def test_an_empty_machine_type_gets_the_default() -> None:
    """`machine: {type: ""}` (KubeVirt's examples) is the default machine type too."""
    raw = demo_vmi()["spec"]
    raw["domain"]["machine"] = {"type": ""}
    assert default_vmi_spec(raw, DEFAULTS)["domain"]["machine"] == {"type": "pc"}


def test_the_default_machine_type_is_q35_and_pc_is_honoured() -> None:
    """Unconfigured admission defaults the machine type to q35 (KubeVirt's); a spec asking
    for pc keeps it."""
    spec = default_vmi_spec(demo_vmi()["spec"], Defaults())
    assert spec["domain"]["machine"] == {"type": "q35"}
    raw = demo_vmi()["spec"]
    raw["domain"]["machine"] = {"type": "pc"}
    assert default_vmi_spec(raw, Defaults())["domain"]["machine"] == {"type": "pc"}


def test_guest_memory_from_requests() -> None:
    """Only requests.memory set: memory.guest takes it."""
    raw = demo_vmi()["spec"]
    raw["domain"]["memory"] = {}
    raw["domain"]["resources"] = {"requests": {"memory": "256Mi"}}
    assert default_vmi_spec(raw, DEFAULTS)["domain"]["memory"] == {"guest": "256Mi"}


@pytest.mark.parametrize(
    ("disk", "expected"),
    [
        pytest.param({"name": "d"}, {"name": "d", "disk": {"bus": "virtio"}}, id="no-target"),
        pytest.param(
            {"name": "d", "cdrom": {}}, {"name": "d", "cdrom": {"bus": "sata"}}, id="cdrom"
        ),
        pytest.param(
            {"name": "d", "disk": {"bus": "scsi"}},
            {"name": "d", "disk": {"bus": "scsi"}},
            id="kept",
        ),
    ],
)
def test_disk_targets_and_buses(disk: dict[str, Any], expected: dict[str, Any]) -> None:
    """A disk without a target is a disk; a target without a bus gets KubeVirt's bus."""
    raw = {"domain": {"devices": {"disks": [disk]}}, "volumes": [{"name": "d", "emptyDisk": {}}]}
    assert default_vmi_spec(raw, DEFAULTS)["domain"]["devices"]["disks"] == [expected]


def test_defaults_are_idempotent_and_the_patch_applies() -> None:
    """The JSONPatch takes the object to the defaulted one; a second pass adds nothing."""
    obj = demo_vmi()
    patch = mutate("VirtualMachineInstance", obj, DEFAULTS)
    assert [op["path"] for op in patch] == ["/spec"]
    patched = apply_patch(obj, patch)
    assert patched["spec"] == default_vmi_spec(obj["spec"], DEFAULTS)
    assert mutate("VirtualMachineInstance", patched, DEFAULTS) == []


def test_vm_template_is_defaulted() -> None:
    """A VM's template spec gets the VMI defaults; the VM's own fields are kept."""
    vm = {"spec": {"runStrategy": "Always", "template": {"spec": demo_vmi()["spec"]}}}
    (op,) = mutate("VirtualMachine", vm, DEFAULTS)
    assert op["value"]["runStrategy"] == "Always"
    assert op["value"]["template"]["spec"]["domain"]["devices"]["disks"][0]["name"] == (
        "containerdisk"
    )


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param({"domain": "x"}, id="domain-not-object"),
        pytest.param({"domain": {"devices": {"disks": "x"}}, "volumes": 3}, id="lists-not-lists"),
        pytest.param(
            {"domain": {"devices": {"disks": [1]}}, "volumes": [1, {"name": 2}]}, id="items"
        ),
        pytest.param({"domain": {"memory": 5, "cpu": []}}, id="scalars"),
    ],
)
def test_malformed_specs_do_not_break_the_mutator(spec: dict[str, Any]) -> None:
    """Malformed input is defaulted where it can be and otherwise left for validation."""
    mutate("VirtualMachineInstance", {"spec": spec}, DEFAULTS)


def test_other_kinds_are_not_mutated() -> None:
    """Migrations (and anything else) get no patch; a non-object spec gets none either."""
    assert mutate("VirtualMachineInstanceMigration", {"spec": {"vmiName": "a"}}, DEFAULTS) == []
    assert mutate("VirtualMachineInstance", {"spec": "x"}, DEFAULTS) == []


def test_efi_defaults_to_secure_boot_with_q35_and_smm_enabled() -> None:
    """efi: {} becomes secureBoot true, smm: {} becomes enabled true (KubeVirt's API
    defaults) and the machine type q35 (a secure flash needs it); the result is valid."""
    raw = demo_vmi()["spec"]
    raw["domain"]["firmware"]["bootloader"] = {"efi": {}}
    raw["domain"]["features"] = {"smm": {}}
    spec = default_vmi_spec(raw, DEFAULTS)
    domain = spec["domain"]
    assert domain["firmware"]["bootloader"] == {"efi": {"secureBoot": True}}
    assert domain["features"] == {"smm": {"enabled": True}}
    assert domain["machine"] == {"type": "q35"}
    vmi = VirtualMachineInstance.from_dict({**demo_vmi(), "spec": spec})
    assert validate_vmi(vmi) == []


def test_efi_without_secure_boot_keeps_the_default_machine() -> None:
    """secureBoot false: plain OVMF runs on the default machine type."""
    raw = demo_vmi()["spec"]
    raw["domain"]["firmware"]["bootloader"] = {"efi": {"secureBoot": False}}
    spec = default_vmi_spec(raw, DEFAULTS)
    assert spec["domain"]["machine"] == {"type": "pc"}
    assert spec["domain"]["firmware"]["bootloader"] == {"efi": {"secureBoot": False}}


def test_a_shared_volume_gets_no_disk_and_a_lun_gets_scsi() -> None:
    """A volume a virtiofs filesystem shares gets no disk of its own; a lun without a bus
    gets scsi (SCSI passthrough); the result is valid."""
    raw = demo_vmi()
    raw["spec"]["domain"]["devices"] = {
        "filesystems": [{"name": "cfg", "virtiofs": {}}],
        "disks": [{"name": "san", "lun": {}}],
    }
    raw["spec"]["volumes"] += [
        {"name": "cfg", "configMap": {"name": "app"}},
        {"name": "san", "persistentVolumeClaim": {"claimName": "san"}},
    ]
    spec = default_vmi_spec(raw["spec"], DEFAULTS)
    disks = spec["domain"]["devices"]["disks"]
    assert [d["name"] for d in disks] == ["san", "containerdisk"]
    assert disks[0]["lun"] == {"bus": "scsi"}
    vmi = VirtualMachineInstance.from_dict({**raw, "spec": spec})
    assert validate_vmi(vmi) == []
