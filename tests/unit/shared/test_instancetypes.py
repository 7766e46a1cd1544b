"""Every instancetype.kubevirt.io/v1beta1 field applied to a VMI spec as KubeVirt applies
it (shared.instancetypes): the instancetype's fields owned (conflicts named), the
preference's only where the template left them unset, the requirements with KubeVirt's
messages, and an expanded VMI's errors named after the field behind them."""

from __future__ import annotations

from typing import Any

import pytest

from shared.instancetypes.apply import attribute, expand
from shared.instancetypes.requirements import requirement_errors
from shared.instancetypes.target import CONFLICT, Source
from shared.model import FieldError
from shared.model.instancetype import InstancetypeSpec, PreferenceSpec


def _it(**spec: Any) -> InstancetypeSpec:
    return InstancetypeSpec.from_dict({"cpu": {"guest": 4}, "memory": {"guest": "1Gi"}} | spec)


def _pref(**spec: Any) -> PreferenceSpec:
    return PreferenceSpec.from_dict(spec)


def _template() -> dict[str, Any]:
    return {
        "domain": {
            "devices": {
                "disks": [
                    {"name": "root"},
                    {"name": "iso", "cdrom": {}},
                    {"name": "data", "disk": {"bus": "sata"}},
                ],
                "interfaces": [{"name": "default"}, {"name": "b", "bridge": {}}],
                "inputs": [{"name": "tablet"}],
            }
        },
        "networks": [{"name": "default", "pod": {}}, {"name": "b", "multus": {"networkName": "x"}}],
    }


@pytest.mark.parametrize(
    ("preference", "topology"),
    [
        pytest.param(None, (4, 1, 1), id="sockets-default"),
        pytest.param({"preferredCPUTopology": "preferCores"}, (1, 4, 1), id="cores"),
        pytest.param({"preferredCPUTopology": "threads"}, (1, 1, 4), id="threads"),
        pytest.param({"preferredCPUTopology": "any"}, (4, 1, 1), id="any"),
        pytest.param({"preferredCPUTopology": "spread"}, (2, 2, 1), id="spread"),
        pytest.param(
            {"preferredCPUTopology": "spread", "spreadOptions": {"across": "CoresThreads"}},
            (1, 2, 2),
            id="spread-cores-threads",
        ),
    ],
)
def test_vcpus_follow_the_preferred_topology(
    preference: dict[str, Any] | None, topology: tuple[int, int, int]
) -> None:
    """cpu.guest is laid out as KubeVirt's preferred topology says (sockets by default)."""
    pref = _pref(cpu=preference) if preference else None
    cpu = expand({}, instancetype=_it(), preference=pref).spec["domain"]["cpu"]
    assert (cpu["sockets"], cpu["cores"], cpu["threads"]) == topology


def test_every_instancetype_field_lands_in_the_vmi() -> None:
    """nodeSelector, schedulerName, the CPU and memory fields, I/O threads, launch security,
    GPUs, host devices and annotations; overcommitPercent lowers the memory request."""
    it = _it(
        nodeSelector={"zone": "a"},
        schedulerName="s",
        cpu={"guest": 2, "model": "host-model", "dedicatedCPUPlacement": True,
             "isolateEmulatorThread": True, "numa": {"guestMappingPassthrough": {}},
             "realtime": {}, "maxSockets": 8},
        memory={"guest": "1Gi", "hugepages": {"pageSize": "2Mi"}, "overcommitPercent": 25,
                "maxGuest": "4Gi"},
        ioThreadsPolicy="auto",
        ioThreads={"supplementalPoolThreadCount": 2},
        launchSecurity={"sev": {}},
        gpus=[{"name": "g", "deviceName": "d"}],
        hostDevices=[{"name": "h", "deviceName": "d"}],
        annotations={"it": "yes"},
    )  # fmt: skip
    out = expand({}, annotations={}, instancetype=it, preference=None)
    domain = out.spec["domain"]
    assert out.spec["nodeSelector"] == {"zone": "a"} and out.spec["schedulerName"] == "s"
    assert domain["cpu"] == {
        "model": "host-model", "dedicatedCpuPlacement": True, "isolateEmulatorThread": True,
        "numa": {"guestMappingPassthrough": {}}, "realtime": {}, "maxSockets": 8,
        "sockets": 2, "cores": 1, "threads": 1,
    }  # fmt: skip
    assert domain["memory"] == {"hugepages": {"pageSize": "2Mi"}, "maxGuest": "4Gi", "guest": "1Gi"}
    assert domain["resources"] == {"requests": {"memory": "768Mi"}}
    assert domain["ioThreadsPolicy"] == "auto" and domain["launchSecurity"] == {"sev": {}}
    assert domain["ioThreads"] == {"supplementalPoolThreadCount": 2}
    assert domain["devices"] == {
        "gpus": [{"name": "g", "deviceName": "d"}],
        "hostDevices": [{"name": "h", "deviceName": "d"}],
    }
    assert out.annotations == {"it": "yes"}
    assert out.origins["domain.memory.hugepages"].field == "spec.memory.hugepages"


def test_template_fields_an_instancetype_owns_conflict() -> None:
    """A template setting what the instancetype sets (topology, memory, nodeSelector, a
    different annotation) is refused with KubeVirt's message, and nothing is applied."""
    template = {
        "nodeSelector": {"a": "b"},
        "domain": {"cpu": {"cores": 2}, "memory": {"guest": "1Gi"}},
    }
    out = expand(
        template,
        annotations={"k": "mine"},
        instancetype=_it(nodeSelector={"x": "y"}, annotations={"k": "theirs"}),
        preference=_pref(machine={"preferredMachineType": "q35"}),
    )
    paths = [
        "spec.template.spec.domain.cpu.cores",
        "spec.template.spec.domain.memory.guest",
        "spec.template.spec.nodeSelector",
    ]
    assert [(e.path, e.message) for e in out.conflicts] == [
        *((p, f"VM field(s) {p} {CONFLICT}") for p in paths),
        (
            "spec.template.metadata.annotations[k]",
            f"VM field(s) spec.template.metadata.annotations[k] {CONFLICT}",
        ),
    ]
    assert out.spec == template


def test_spread_the_vcpus_cannot_fill_is_refused() -> None:
    """3 vCPUs spread at a ratio of 2: KubeVirt's message, at instancetype.spec.cpu.guest."""
    out = expand(
        {},
        instancetype=_it(cpu={"guest": 3}),
        preference=_pref(cpu={"preferredCPUTopology": "spread"}),
    )
    assert [e.path for e in out.conflicts] == ["instancetype.spec.cpu.guest"]
    assert "3 vCPUs provided by the instance type are not divisible" in out.conflicts[0].message


def test_device_preferences_fill_only_what_is_unset() -> None:
    """Disk, cdrom, interface and input preferences apply to every device that leaves them
    unset; the rng, TPM, autoattach and multiqueue ones when the template has none."""
    pref = _pref(
        devices={
            "preferredDiskBus": "virtio", "preferredCdromBus": "sata", "preferredDiskCache": "none",
            "preferredDiskIO": "native", "preferredDiskDedicatedIoThread": True,
            "preferredDiskBlockSize": {"matchVolume": {"enabled": True}},
            "preferredInterfaceModel": "e1000e", "preferredInterfaceMasquerade": {},
            "preferredInputBus": "usb", "preferredInputType": "tablet",
            "preferredRng": {}, "preferredTPM": {}, "preferredAutoattachMemBalloon": False,
            "preferredNetworkInterfaceMultiQueue": True, "preferredUseVirtioTransitional": False,
            "preferredPanicDeviceModel": "isa",
        }
    )  # fmt: skip
    devices = expand(_template(), instancetype=None, preference=pref).spec["domain"]["devices"]
    root, iso, data = devices["disks"]
    assert root == {
        "name": "root", "disk": {"bus": "virtio"}, "cache": "none", "io": "native",
        "blockSize": {"matchVolume": {"enabled": True}}, "dedicatedIOThread": True,
    }  # fmt: skip
    assert iso == {"name": "iso", "cdrom": {"bus": "sata"}}
    assert data["disk"] == {"bus": "sata"} and "dedicatedIOThread" not in data
    pod, bridged = devices["interfaces"]
    assert pod == {"name": "default", "model": "e1000e", "masquerade": {}}
    assert bridged == {"name": "b", "bridge": {}, "model": "e1000e"}
    assert devices["inputs"] == [{"name": "tablet", "bus": "usb", "type": "tablet"}]
    assert devices["rng"] == {} and devices["tpm"] == {}
    assert devices["autoattachMemBalloon"] is False
    assert devices["networkInterfaceMultiqueue"] is True
    assert devices["useVirtioTransitional"] is False
    assert devices["panicDevices"] == [{"model": "isa"}]


def test_template_values_win_over_preferences() -> None:
    """A template's own rng, machine type, grace period and annotation stay."""
    template = {
        "domain": {"devices": {"rng": {}}, "machine": {"type": "pc"}},
        "terminationGracePeriodSeconds": 5,
    }
    pref = _pref(
        devices={"preferredRng": {"x": 1}},
        machine={"preferredMachineType": "q35"},
        preferredTerminationGracePeriodSeconds=180,
        annotations={"k": "pref", "new": "v"},
    )
    out = expand(template, annotations={"k": "mine"}, instancetype=None, preference=pref)
    assert out.spec == template
    assert out.annotations == {"new": "v"}


def test_feature_firmware_clock_and_spec_preferences() -> None:
    """Features (acpi always, the others when unset, hyperv per key), firmware (EFI and
    secure boot, BIOS serial), the clock, CPU features, subdomain, grace period, arch."""
    pref = _pref(
        features={"preferredAcpi": {}, "preferredSmm": {}, "preferredHyperv": {"relaxed": {}}},
        firmware={"preferredUseEfi": True, "preferredUseSecureBoot": True},
        clock={"preferredClockOffset": {"utc": {}}, "preferredTimer": {"hpet": {"present": False}}},
        cpu={"preferredCPUFeatures": [{"name": "vmx"}, {"name": "svm"}]},
        preferredSubdomain="sub",
        preferredTerminationGracePeriodSeconds=180,
        preferredArchitecture="amd64",
    )
    template = {"domain": {"cpu": {"features": [{"name": "svm", "policy": "disable"}]}}}
    spec = expand(template, instancetype=None, preference=pref).spec
    domain = spec["domain"]
    assert domain["features"] == {"acpi": {}, "smm": {}, "hyperv": {"relaxed": {}}}
    assert domain["firmware"] == {"bootloader": {"efi": {"secureBoot": True}}}
    assert domain["clock"] == {"utc": {}, "timer": {"hpet": {"present": False}}}
    assert domain["cpu"]["features"] == [{"name": "svm", "policy": "disable"}, {"name": "vmx"}]
    assert (spec["subdomain"], spec["terminationGracePeriodSeconds"]) == ("sub", 180)
    assert spec["architecture"] == "amd64"
    bios = _pref(firmware={"preferredUseBios": True, "preferredUseBiosSerial": True})
    spec = expand({}, instancetype=None, preference=bios).spec
    assert spec["domain"]["firmware"] == {"bootloader": {"bios": {"useSerial": True}}}


@pytest.mark.parametrize(
    ("instancetype", "template", "preference", "path", "message"),
    [
        pytest.param(
            _it(cpu={"guest": 1}), {}, {"cpu": {"guest": 2}}, "spec.instancetype",
            "insufficient CPU resources of 1 vCPU provided by instance type, preference "
            "requires 2 vCPU",
            id="instancetype-cpu",
        ),
        pytest.param(
            _it(memory={"guest": "64M"}), {}, {"memory": {"guest": "512Mi"}}, "spec.instancetype",
            "insufficient Memory resources of 64M provided by instance type, preference "
            "requires 512Mi",
            id="instancetype-memory",
        ),
        pytest.param(
            None, {"domain": {"cpu": {"sockets": 1}}}, {"cpu": {"guest": 2}},
            "spec.template.spec.domain.cpu.sockets",
            "insufficient CPU resources of 1 vCPU provided by VirtualMachine, preference "
            "requires 2 vCPU provided as sockets",
            id="template-cpu",
        ),
        pytest.param(
            None, {}, {"cpu": {"guest": 2}}, "spec.template.spec.domain.cpu",
            "no CPU resources provided by VirtualMachine, preference requires 2 vCPU",
            id="template-no-cpu",
        ),
        pytest.param(
            None, {"domain": {"memory": {"guest": "128Mi"}}}, {"memory": {"guest": "1Gi"}},
            "spec.template.spec.domain.memory",
            "insufficient Memory resources of 128Mi provided by VirtualMachine, preference "
            "requires 1Gi",
            id="template-memory",
        ),
        pytest.param(
            None, {}, {"architecture": "arm64"}, "spec.template.spec.architecture",
            "preference requires architecture arm64 but amd64 is being requested",
            id="architecture",
        ),
    ],
)  # fmt: skip
def test_unmet_requirements_are_named_with_kubevirts_messages(
    instancetype: InstancetypeSpec | None,
    template: dict[str, Any],
    preference: dict[str, Any],
    path: str,
    message: str,
) -> None:
    """A preference's requirements not met by the instancetype (or, without one, the
    template) refuse the VM with KubeVirt's message."""
    errors = requirement_errors(
        template, instancetype=instancetype, preference=_pref(requirements=preference)
    )
    assert [(e.path, e.message) for e in errors] == [
        (path, f"failure checking preference requirements: {message}")
    ]


def test_met_requirements_pass() -> None:
    """u1.small-like sizes meet a 1 vCPU / 512Mi preference."""
    pref = _pref(requirements={"cpu": {"guest": 1}, "memory": {"guest": "512Mi"}})
    assert requirement_errors({}, instancetype=_it(), preference=pref) == []


def test_errors_of_the_expanded_vmi_name_the_field_behind_them() -> None:
    """An error at a VMI path an instancetype or preference set names that object's field;
    any other is placed on the template, saying the objects were applied."""
    out = expand(
        _template(),
        instancetype=_it(memory={"guest": "1Gi", "hugepages": {"pageSize": "2Mi"}}),
        preference=_pref(devices={"preferredTPM": {}}),
    )
    errors = [
        FieldError(path="spec.domain.memory.hugepages", message="not supported by kubevirt-py"),
        FieldError(path="spec.domain.devices.tpm", message="not supported by kubevirt-py"),
        FieldError(path="spec.domain.devices.disks[2].disk.bus", message="bad"),
    ]
    names = {Source.INSTANCETYPE: 'VMCIT "big"', Source.PREFERENCE: 'VMCP "win"'}
    found = [(e.path, e.message) for e in attribute(errors, out, names=names)]
    assert found == [
        (
            "spec.instancetype",
            'VMCIT "big" field spec.memory.hugepages sets '
            "spec.template.spec.domain.memory.hugepages: not supported by kubevirt-py",
        ),
        (
            "spec.preference",
            'VMCP "win" field spec.devices.preferredTPM sets '
            "spec.template.spec.domain.devices.tpm: not supported by kubevirt-py",
        ),
        (
            "spec.template.spec.domain.devices.disks[2].disk.bus",
            "bad (with the VM's instancetype and preference applied)",
        ),
    ]
