"""The unsupported-fields list against the model: every KubeVirt field the model does not
honour is refused at its path, unknown keys are refused, honoured ones pass."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration
from shared.model._codec import ListCodec, Model, ModelCodec, plan_of
from shared.model.instancetype import InstancetypeSpec, PreferenceSpec
from shared.model.kubevirt_only import ANY_KEY, KUBEVIRT_ONLY
from shared.model.meta import ObjectMeta
from shared.model.migration import MigrationSpec
from shared.model.unsupported import (
    ALLOWED_VALUES,
    KUBERNETES_OWN,
    NOT_SUPPORTED,
    TYPED_UNSUPPORTED,
    UNKNOWN_FIELD,
    unsupported_fields,
)
from shared.model.vm import VMSpec
from shared.model.vmi import VMISpec
from tests.unit.shared._validation_support import edit, load

# The fixture as the handler reports it carries fields nothing here honours yet (none now).
_NOT_HONOURED: dict[str, Any] = {}


def _fixture() -> dict[str, Any]:
    return edit(load("vmi-running.yaml"), _NOT_HONOURED)


def _reachable(cls: type[Model], seen: set[type[Model]]) -> set[type[Model]]:
    if cls in seen or cls is ObjectMeta:
        return seen
    seen.add(cls)
    for fp in plan_of(cls).fields:
        codec = fp.codec.item if isinstance(fp.codec, ListCodec) else fp.codec
        if isinstance(codec, ModelCodec):
            _reachable(codec.cls, seen)
    return seen


SPEC_CLASSES = (
    _reachable(VMISpec, set())
    | _reachable(VMSpec, set())
    | {MigrationSpec}
    | _reachable(InstancetypeSpec, set())
    | _reachable(PreferenceSpec, set())
)


def test_every_spec_class_has_an_entry() -> None:
    """Adding a model class under a spec forces a decision about its KubeVirt-only keys."""
    decided = KUBEVIRT_ONLY.keys() | KUBERNETES_OWN
    missing = sorted(c.__name__ for c in SPEC_CLASSES if c not in decided)
    assert missing == []


def test_lists_do_not_overlap_the_model() -> None:
    """A KubeVirt-only key is not typed by the model; a typed-unsupported key is typed."""
    for cls, keys in KUBEVIRT_ONLY.items():
        typed = set(plan_of(cls).by_key)
        assert not (keys & typed), (cls.__name__, keys & typed)
    for cls, keys in TYPED_UNSUPPORTED.items():
        assert keys <= set(plan_of(cls).by_key), cls.__name__
    for cls, key in ALLOWED_VALUES:
        assert key in KUBEVIRT_ONLY[cls]


def _vmi(changes: dict[str, Any]) -> list[tuple[str, str]]:
    vmi = VirtualMachineInstance.from_dict(edit(_fixture(), changes))
    return [(e.path, e.message) for e in unsupported_fields(vmi)]


def test_the_fixture_is_clean() -> None:
    """A VMI of supported fields only (present-but-empty typed keys included) passes,
    vmNetworkCIDR among them; the fields the fixture had beyond those are each refused."""
    full = VirtualMachineInstance.from_dict(load("vmi-running.yaml"))
    assert sorted(e.path for e in unsupported_fields(full)) == sorted(_NOT_HONOURED)
    assert _vmi({"spec.domain.devices.interfaces[0].masquerade": {}, "spec.nodeSelector": {}}) == []


REFUSED = [
    pytest.param(
        {"spec.domain.devices.gpus": [{"name": "g"}]}, "spec.domain.devices.gpus", id="gpu"
    ),
    pytest.param(
        {"spec.domain.devices.hostDevices": [{"name": "h"}]},
        "spec.domain.devices.hostDevices",
        id="host-device",
    ),
    pytest.param(
        {"spec.domain.devices.interfaces[0]": {"name": "default", "sriov": {}}},
        "spec.domain.devices.interfaces[0].sriov",
        id="sriov",
    ),
    pytest.param(
        {"spec.domain.devices.disks[0]": {"name": "d", "lun": {"reservation": True}}},
        "spec.domain.devices.disks[0].lun.reservation",
        id="lun-reservation",
    ),
    pytest.param(
        {"spec.domain.devices.watchdog": {"name": "w", "diag288": {}}},
        "spec.domain.devices.watchdog.diag288",
        id="watchdog-diag288",
    ),
    pytest.param({"spec.resourceClaims": []}, "spec.resourceClaims", id="resource-claims"),
    pytest.param(
        {"spec.domain.resources.limits": {"memory": "1Gi", "nvidia.com/gpu": 1}},
        "spec.domain.resources.limits[nvidia.com/gpu]",
        id="resource-gpu",
    ),
]


@pytest.mark.parametrize(("changes", "path"), REFUSED)
def test_kubevirt_fields_are_not_supported(changes: dict[str, Any], path: str) -> None:
    """Each KubeVirt field nobody here honours is named with "not supported by kubevirt-py"."""
    assert (path, NOT_SUPPORTED) in _vmi(changes)


def test_listed_fields_are_refused_where_they_stand() -> None:
    """Every key of the list, put at its place, is refused at that exact path."""
    vmi = _fixture()
    places: dict[type[Model], tuple[str, dict[str, Any]]] = {
        VMISpec: ("spec", vmi["spec"]),
        type(VirtualMachineInstance.from_dict(vmi).spec.domain): (
            "spec.domain",
            vmi["spec"]["domain"],
        ),
    }
    for cls, (path, node) in places.items():
        for key in sorted(KUBEVIRT_ONLY[cls]):
            if (cls, key) in ALLOWED_VALUES or key == ANY_KEY:
                continue
            node[key] = {"x": 1}
            try:
                found = [(e.path, e.message) for e in unsupported_fields(
                    VirtualMachineInstance.from_dict(vmi)
                )]  # fmt: skip
                assert (f"{path}.{key}", NOT_SUPPORTED) in found
            finally:
                del node[key]


def test_unknown_fields_are_refused() -> None:
    """A typo (a key KubeVirt does not know) is refused as unknown, at every level."""
    found = _vmi({"spec.domain.devices.disk": [], "spec.domian": {}, "sepc": 1})
    assert ("spec.domain.devices.disk", UNKNOWN_FIELD) in found
    assert ("spec.domian", UNKNOWN_FIELD) in found
    assert ("sepc", UNKNOWN_FIELD) in found


def test_allowed_values_pass() -> None:
    """A KubeVirt field set to what kubevirt-py does anyway is not refused."""
    assert _vmi({
        "spec.domain.devices.disableHotplug": False,
        "spec.domain.devices.autoattachGraphicsDevice": False,
        "spec.domain.devices.autoattachPodInterface": False,
    }) == []  # fmt: skip
    assert _vmi({"spec.domain.devices.autoattachGraphicsDevice": True}) == []


HONOURED = {
    "spec.domain.cpu.model": "host-model",
    "spec.domain.devices.rng": {},
    "spec.domain.firmware.uuid": "5d307ca9-b3ef-428c-8861-06e72d69f223",
    "spec.domain.firmware.serial": "e4686d2c-6e8d-4335-b8fd-81bee22f4814",
    "spec.domain.firmware.bootloader": {"efi": {"secureBoot": True, "persistent": False}},
    "spec.domain.features": {
        "smm": {"enabled": True},
        "acpi": {},
        "apic": {"endOfInterrupt": True},
        "hyperv": {"relaxed": {}, "spinlocks": {"spinlocks": 8191}, "vapic": {}},
        "kvm": {"hidden": True},
        "pvspinlock": {"enabled": False},
    },
    "spec.domain.clock": {
        "utc": {"offsetSeconds": 3600},
        "timer": {"hpet": {"present": False}, "pit": {"tickPolicy": "delay"}},
    },
    "spec.domain.devices.inputs": [{"name": "tablet", "type": "tablet", "bus": "usb"}],
    "spec.domain.devices.watchdog": {"name": "w", "i6300esb": {"action": "reset"}},
    "spec.domain.devices.panicDevices": [{"model": "isa"}],
    "spec.domain.devices.video": {"type": "virtio"},
    "spec.domain.devices.sound": {"name": "audio", "model": "ac97"},
    "spec.domain.devices.autoattachSerialConsole": False,
    "spec.domain.devices.autoattachMemBalloon": False,
    "spec.domain.devices.autoattachInputDevice": True,
    "spec.domain.devices.logSerialConsole": True,
    "spec.domain.devices.useVirtioTransitional": True,
    "spec.domain.devices.disableHotplug": True,
    "spec.domain.devices.autoattachVSOCK": True,
    "spec.domain.devices.downwardMetrics": {},
    "spec.priorityClassName": "high",
    "spec.schedulerName": "default-scheduler",
    "spec.hostname": "myhost",
    "spec.subdomain": "mysub",
    "spec.dnsPolicy": "None",
    "spec.dnsConfig": {"nameservers": ["1.1.1.1"], "options": [{"name": "ndots", "value": "2"}]},
    "spec.tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
    "spec.affinity": {"nodeAffinity": {"anything": "the API server checks it"}},
    "spec.topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone"}],
}


def test_honoured_fields_pass() -> None:
    """The fields kubevirt-py honours (EFI, SMM, cpu.model, rng, SMBIOS identity, the
    pod-level fields) are not refused; Kubernetes' own affinity is not walked."""
    assert _vmi(HONOURED) == []


def test_unknown_keys_inside_typed_pod_fields_are_refused() -> None:
    """A typo inside a toleration or dnsConfig is named, as KubeVirt's schema would."""
    found = _vmi({"spec.tolerations": [{"kye": "k"}], "spec.dnsConfig": {"nameserver": []}})
    assert ("spec.tolerations[0].kye", UNKNOWN_FIELD) in found
    assert ("spec.dnsConfig.nameserver", UNKNOWN_FIELD) in found


@pytest.mark.parametrize("strategy", ["None", "LiveMigrate", "LiveMigrateIfPossible", "External"])
def test_eviction_strategies_are_honoured(strategy: str) -> None:
    """Every KubeVirt evictionStrategy is honoured (drain and eviction), so none is refused."""
    assert _vmi({"spec.evictionStrategy": strategy}) == []


def test_vm_and_migration_specs_are_walked() -> None:
    """A VM's own fields and its template, and a migration's spec, are checked."""
    vm = VirtualMachine.from_dict({
        "spec": {
            "instancetype": {"name": "u1.small", "inferFromVolume": "root"},
            "updateVolumesStrategy": "Migration",  # honoured (docs/volume-migration.md)
            "template": {"spec": {"domain": {"devices": {"gpus": []}}}},
        }
    })  # fmt: skip
    paths = [e.path for e in unsupported_fields(vm)]
    assert paths == [
        "spec.template.spec.domain.devices.gpus",
    ]
    vmim = VirtualMachineInstanceMigration.from_dict(
        {"spec": {"vmiName": "a", "addedNodeSelector": {"a": "b"}, "unknown": {}}}
    )
    assert [(e.path, e.message) for e in unsupported_fields(vmim)] == [
        ("spec.unknown", UNKNOWN_FIELD)
    ]


def test_metadata_and_status_are_not_checked() -> None:
    """Kubernetes metadata and the status the daemons write are not the user's spec."""
    vmi = VirtualMachineInstance.from_dict(
        {"metadata": {"name": "a", "managedFields": []}, "status": {"whatever": 1}}
    )
    assert unsupported_fields(vmi) == []
