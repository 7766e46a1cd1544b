"""Validation of the guest platform and the pod-level fields: EFI / secure boot / SMM
(KubeVirt's rules), the SMBIOS identity, cpu.model under emulation, tolerations and DNS."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import VirtualMachineInstance
from shared.model._validate_firmware import TCG_CPU_MODELS
from shared.model.validation import ValidationLimits, validate_vmi
from tests.unit.shared._validation_support import edit, load

TCG = ValidationLimits(emulation=True)


def _errors(changes: dict[str, Any], *, limits: ValidationLimits = TCG) -> set[str]:
    vmi = VirtualMachineInstance.from_dict(edit(load("vmi-kernel-boot.yaml"), changes))
    return {e.path for e in validate_vmi(vmi, limits=limits)}


VALID = [
    pytest.param({"spec.domain.firmware.bootloader": {"efi": {"secureBoot": False}}}, id="efi"),
    pytest.param(
        {
            "spec.domain.firmware.bootloader": {"efi": {}},
            "spec.domain.features": {"smm": {}},
            "spec.domain.machine": {"type": "pc-q35-7.2"},
        },
        id="secure-boot",
    ),
    pytest.param({"spec.domain.firmware.bootloader": {"bios": {}}}, id="bios"),
    pytest.param({"spec.domain.firmware.uuid": "5d307ca9-b3ef-428c-8861-06e72d69f223"}, id="uuid"),
    pytest.param({"spec.domain.firmware.serial": "SN-0001 rack 4"}, id="serial"),
    pytest.param(
        {
            "spec.domain.chassis": {
                "manufacturer": "Example",
                "version": "2",
                "serial": "C-1",
                "asset": "A 7",
                "sku": "rack",
            }
        },
        id="chassis",
    ),
    pytest.param(
        {
            "spec.domain.firmware.acpi": {"slicNameRef": "oem"},
            "spec.volumes": [{"name": "oem", "secret": {"secretName": "oem-tables"}}],
        },
        id="acpi-slic",
    ),
    pytest.param({"spec.domain.cpu.model": "host-model"}, id="host-model"),
    pytest.param({"spec.domain.cpu.model": "Nehalem"}, id="tcg-model"),
    pytest.param({"spec.domain.devices.rng": {}}, id="rng"),
    pytest.param(
        {
            "spec.priorityClassName": "system-node-critical",
            "spec.schedulerName": "default-scheduler",
            "spec.hostname": "web-1",
            "spec.subdomain": "web",
            "spec.dnsPolicy": "None",
            "spec.dnsConfig": {"nameservers": ["198.18.0.10"], "searches": ["svc.local"]},
            "spec.tolerations": [
                {"key": "a", "operator": "Equal", "value": "b", "effect": "NoSchedule"},
                {"operator": "Exists"},
                {"key": "c", "effect": "NoExecute", "tolerationSeconds": 30},
            ],
        },
        id="pod-fields",
    ),
]


@pytest.mark.parametrize("changes", VALID)
def test_valid_platform_and_pod_fields(changes: dict[str, Any]) -> None:
    """Each of these is accepted under emulation."""
    assert _errors(changes) == set()


REFUSED = [
    pytest.param(
        {"spec.domain.firmware.bootloader": {"efi": {}}},
        "spec.domain.firmware.bootloader.efi.secureBoot",
        id="secure-boot-needs-smm",
    ),
    pytest.param(
        {
            "spec.domain.firmware.bootloader": {"efi": {"secureBoot": True}},
            "spec.domain.features": {"smm": {"enabled": False}},
        },
        "spec.domain.firmware.bootloader.efi.secureBoot",
        id="smm-disabled",
    ),
    pytest.param(
        {
            "spec.domain.firmware.bootloader": {"efi": {}},
            "spec.domain.features": {"smm": {}},
            "spec.domain.machine": {"type": "pc"},
        },
        "spec.domain.machine.type",
        id="secure-boot-on-pc",
    ),
    pytest.param(
        {"spec.domain.firmware.bootloader": {"efi": {"secureBoot": False}, "bios": {}}},
        "spec.domain.firmware.bootloader",
        id="bios-and-efi",
    ),
    pytest.param(
        {"spec.domain.firmware.uuid": "not-a-uuid"}, "spec.domain.firmware.uuid", id="uuid"
    ),
    pytest.param(
        {"spec.domain.firmware.serial": "bad\u00e9"}, "spec.domain.firmware.serial", id="serial"
    ),
    pytest.param(
        {"spec.domain.chassis": {"asset": "tab\there"}}, "spec.domain.chassis.asset", id="asset"
    ),
    pytest.param(
        {"spec.domain.chassis": {"sku": "x" * 256}}, "spec.domain.chassis.sku", id="sku-long"
    ),
    pytest.param(
        {
            "spec.domain.firmware.acpi": {"msdmNameRef": "oem"},
            "spec.volumes": [{"name": "oem", "secret": {"secretName": "oem-tables"}}],
        },
        "spec.domain.firmware.acpi.msdmNameRef",
        id="acpi-msdm",
    ),
    pytest.param(
        {"spec.domain.firmware.acpi": {"slicNameRef": "nothing"}},
        "spec.domain.firmware.acpi.slicNameRef",
        id="acpi-no-volume",
    ),
    pytest.param(
        {
            "spec.domain.firmware.acpi": {"slicNameRef": "oem"},
            "spec.volumes": [{"name": "oem", "configMap": {"name": "oem-tables"}}],
        },
        "spec.domain.firmware.acpi.slicNameRef",
        id="acpi-not-a-secret",
    ),
    pytest.param(
        {
            "spec.domain.firmware.acpi": {"slicNameRef": "oem"},
            "spec.volumes": [{"name": "oem", "secret": {"secretName": "oem-tables"}}],
            "spec.domain.devices.disks": [{"name": "oem", "disk": {}}],
        },
        "spec.domain.firmware.acpi.slicNameRef",
        id="acpi-also-a-disk",
    ),
    pytest.param(
        {"spec.domain.cpu.model": "host-passthrough"}, "spec.domain.cpu.model", id="passthrough"
    ),
    pytest.param(
        {"spec.domain.cpu.model": "Skylake-Client"}, "spec.domain.cpu.model", id="skylake"
    ),
    pytest.param({"spec.domain.cpu.model": "<x/>"}, "spec.domain.cpu.model", id="markup"),
    pytest.param({"spec.priorityClassName": "High_Prio"}, "spec.priorityClassName", id="priority"),
    pytest.param({"spec.hostname": "a.b"}, "spec.hostname", id="hostname"),
    pytest.param({"spec.dnsPolicy": "None"}, "spec.dnsConfig.nameservers", id="dns-none"),
    pytest.param(
        {"spec.dnsConfig": {"nameservers": ["1.1.1.1", "1.0.0.1", "8.8.8.8", "9.9.9.9"]}},
        "spec.dnsConfig.nameservers",
        id="dns-four-nameservers",
    ),
    pytest.param(
        {"spec.tolerations": [{"key": "a", "operator": "Exists", "value": "b"}]},
        "spec.tolerations[0].value",
        id="toleration-exists-value",
    ),
    pytest.param(
        {"spec.tolerations": [{"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}]},
        "spec.tolerations[0].tolerationSeconds",
        id="toleration-seconds",
    ),
]


@pytest.mark.parametrize(("changes", "path"), REFUSED)
def test_refused_naming_the_field(changes: dict[str, Any], path: str) -> None:
    """Each mistake is named at its field path."""
    assert path in _errors(changes)


def test_kvm_hosts_take_any_cpu_model() -> None:
    """Without emulation, host-passthrough and any named model are the node's business."""
    kvm = ValidationLimits(emulation=False)
    assert _errors({"spec.domain.cpu.model": "host-passthrough"}, limits=kvm) == set()
    assert _errors({"spec.domain.cpu.model": "Skylake-Client"}, limits=kvm) == set()


def test_tcg_models_message_lists_the_usable_ones() -> None:
    """The refusal names the models TCG can run, so the user can pick one."""
    vmi = VirtualMachineInstance.from_dict(
        edit(load("vmi-kernel-boot.yaml"), {"spec.domain.cpu.model": "EPYC"})
    )
    [error] = [e for e in validate_vmi(vmi, limits=TCG) if e.path == "spec.domain.cpu.model"]
    assert "emulation" in error.message
    assert all(model in error.message for model in TCG_CPU_MODELS)
