"""Round-trip exactness and parsing of the kubevirt.io/v1 model (shared.model)."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.model import (
    ConditionStatus,
    KubeObject,
    MigrationPhase,
    ParseError,
    PrintableStatus,
    RunStrategy,
    VirtualMachine,
    VirtualMachineInstance,
    VirtualMachineInstanceMigration,
    VMIConditionType,
    VMIPhase,
)

DATA = Path(__file__).parent / "data"

EXAMPLES = [
    pytest.param("vm-fedora.yaml", VirtualMachine, id="fedora-vm"),
    pytest.param("vmi-kernel-boot.yaml", VirtualMachineInstance, id="kernel-boot-vmi"),
    pytest.param("vmi-running.yaml", VirtualMachineInstance, id="running-vmi"),
    pytest.param("vmim.yaml", VirtualMachineInstanceMigration, id="migration"),
]


# Typed maps (string → string); their entries are data, not model fields.
MAP_KEYS = frozenset(
    {
        "labels",
        "annotations",
        "nodeSelector",
        "activePods",
        "data",
        "targetDirectMigrationNodePorts",
    }
)


def in_map(path: tuple[Any, ...]) -> bool:
    """True when `path` names an entry of a typed string map (e.g. a label)."""
    return len(path) >= 2 and path[-2] in MAP_KEYS


def load(name: str) -> dict[str, Any]:
    """A fixture manifest as a wire dict."""
    data = yaml.safe_load((DATA / name).read_text())
    assert isinstance(data, dict)
    return data


def nodes(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every (path, value) in a JSON tree, the root first."""
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from nodes(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from nodes(v, (*path, i))


def at(tree: Any, path: tuple[Any, ...]) -> Any:
    """The node of `tree` at `path`."""
    for step in path:
        tree = tree[step]
    return tree


@pytest.mark.parametrize(("name", "cls"), EXAMPLES)
def test_examples_round_trip_exactly(name: str, cls: type[KubeObject]) -> None:
    """A realistic manifest parses and renders back to an identical dict."""
    d = load(name)
    assert cls.from_dict(d).to_dict() == d


@pytest.mark.parametrize(("name", "cls"), EXAMPLES)
def test_unknown_fields_survive_at_every_level(name: str, cls: type[KubeObject]) -> None:
    """An unknown key added to every object (not typed maps) is kept and rendered back."""
    d = load(name)
    objects = [p for p, v in nodes(d) if isinstance(v, dict) and not (p and p[-1] in MAP_KEYS)]
    for path in objects:
        at(d, path)["x-future-field"] = {"nested": [1, "two", None], "flag": True}
    obj = cls.from_dict(d)
    assert obj.to_dict() == d
    assert obj.extra["x-future-field"] == {"nested": [1, "two", None], "flag": True}


@pytest.mark.parametrize(("name", "cls"), EXAMPLES)
def test_omitting_any_key_keeps_it_omitted(name: str, cls: type[KubeObject]) -> None:
    """Deleting any single key still round-trips: nothing is defaulted on render."""
    original = load(name)
    keyed = [p for p, _ in nodes(original) if p and isinstance(p[-1], str)]
    for path in keyed:
        d = copy.deepcopy(original)
        del at(d, path[:-1])[path[-1]]
        assert cls.from_dict(d).to_dict() == d, path


@pytest.mark.parametrize(("name", "cls"), EXAMPLES)
@pytest.mark.parametrize(
    "replacement",
    [
        pytest.param(None, id="null"),
        pytest.param("empty", id="empty-collection"),
    ],
)
def test_key_presence_survives_null_and_empty(
    name: str, cls: type[KubeObject], replacement: Any
) -> None:
    """Any field set to null or to an empty list/object keeps its presence and value."""
    original = load(name)
    for path, value in nodes(original):
        if not path or not isinstance(path[-1], str) or in_map(path):
            continue
        if replacement == "empty":
            if not isinstance(value, dict | list):
                continue
            new: Any = type(value)()
        else:
            new = None
        d = copy.deepcopy(original)
        at(d, path[:-1])[path[-1]] = new
        assert cls.from_dict(d).to_dict() == d, path


def test_to_dict_does_not_alias_input_or_model() -> None:
    """Mutating the input or the rendered dict never changes the parsed model."""
    d = load("vm-fedora.yaml")
    vm = VirtualMachine.from_dict(d)
    before = vm.to_dict()
    d["status"]["volumeSnapshotStatuses"][0]["name"] = "changed"
    rendered = vm.to_dict()
    rendered["status"]["volumeSnapshotStatuses"].clear()
    assert vm.to_dict() == before


def test_typed_fields_are_parsed() -> None:
    """Typed fields come out as Python values and enums, not raw dicts."""
    vmi = VirtualMachineInstance.from_dict(load("vmi-running.yaml"))
    assert vmi.key == "default/testvm"
    assert vmi.status.phase is VMIPhase.RUNNING
    assert vmi.spec.domain.cpu.sockets == 2
    assert vmi.spec.domain.devices.disks[1].cdrom is not None
    assert vmi.spec.domain.devices.disks[1].cdrom.readonly is True
    assert vmi.spec.volumes[3].host_disk is not None
    assert vmi.spec.volumes[3].host_disk.type == "DiskOrCreate"
    assert vmi.spec.networks[0].pod is not None
    assert vmi.spec.networks[0].pod.vm_network_cidr == "10.0.2.0/24"
    assert vmi.status.guest_os_info is not None
    assert vmi.status.guest_os_info.version_id == "12"
    assert vmi.status.active_pods == {"8c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f": "node-1"}
    assert vmi.status.migration_state is not None
    assert vmi.status.migration_state.target_node_domain_detected is True
    assert vmi.metadata.owner_references[0].controller is True
    assert vmi.status.interfaces[0].ip_addresses == ("10.244.1.23", "fd10:244::17")


def test_guest_memory_accessor_prefers_guest_then_requests() -> None:
    """guest_memory_bytes() reads memory.guest, else requests.memory, else None."""
    running = VirtualMachineInstance.from_dict(load("vmi-running.yaml"))
    assert running.spec.domain.guest_memory_bytes() == 128 * 1024**2
    kernel = VirtualMachineInstance.from_dict(load("vmi-kernel-boot.yaml"))
    assert kernel.spec.domain.guest_memory_bytes() == 1024**3
    assert VirtualMachineInstance().spec.domain.guest_memory_bytes() is None


def test_spec_accessors() -> None:
    """vcpus, volume/disk/network lookup, startStrategy and grace period accessors."""
    vmi = VirtualMachineInstance.from_dict(load("vmi-running.yaml"))
    spec = vmi.spec
    assert spec.domain.vcpus() == 2
    assert spec.volume("scratch") is not None
    assert spec.volume("missing") is None
    disk = spec.domain.devices.disk("cloudinitdisk")
    assert disk is not None and disk.is_cdrom and disk.bus == "sata"
    assert spec.network("default") is not None
    assert spec.starts_paused
    assert spec.grace_period_seconds == 30
    assert VirtualMachineInstance().spec.grace_period_seconds == 30
    assert spec.domain.kernel_boot is not None
    assert spec.domain.resources.requests.cpu_millis() == 100
    assert spec.domain.resources.limits.memory_bytes() == 256 * 1024**2


def test_condition_accessors_and_updates() -> None:
    """condition() finds by type; with_condition replaces in place; unknown types load as str."""
    vmi = VirtualMachineInstance.from_dict(load("vmi-running.yaml"))
    status = vmi.status
    ready = status.condition(VMIConditionType.READY)
    assert ready is not None and ready.is_true
    assert status.condition_is_true("AgentConnected")
    assert status.condition(VMIConditionType.PAUSED) is None
    unknown = status.condition("StorageLiveMigratable")
    assert unknown is not None and type(unknown.type) is str
    not_ready = dataclasses.replace(ready, status=ConditionStatus.FALSE, reason="GuestNotRunning")
    updated = status.with_condition(not_ready)
    assert [c.type for c in updated.conditions] == [c.type for c in status.conditions]
    assert updated.condition_is_true(VMIConditionType.READY) is False
    assert updated.without_condition("Ready").condition("Ready") is None
    assert status.condition_is_true("Ready"), "the original is unchanged"


def test_status_update_with_replace_renders_camel_case() -> None:
    """A status built with dataclasses.replace renders only what is set, in camelCase."""
    vmi = VirtualMachineInstance.from_dict(load("vmi-kernel-boot.yaml"))
    status = dataclasses.replace(vmi.status, phase=VMIPhase.SCHEDULED, node_name="node-1")
    new = dataclasses.replace(vmi, status=status)
    assert new.to_dict()["status"] == {"phase": "Scheduled", "nodeName": "node-1"}
    assert "status" not in vmi.to_dict()


def test_replace_overrides_a_null_kept_in_extra() -> None:
    """A typed value set by replace wins over a null the wire carried for the same key."""
    vm = VirtualMachine.from_dict(load("vm-fedora.yaml"))
    meta = vm.spec.template.metadata
    assert meta.to_dict()["creationTimestamp"] is None
    stamped = dataclasses.replace(meta, creation_timestamp="2024-05-01T00:00:00Z")
    assert stamped.to_dict()["creationTimestamp"] == "2024-05-01T00:00:00Z"


def test_vm_accessors() -> None:
    """effective_run_strategy follows runStrategy, then running, then Halted."""
    vm = VirtualMachine.from_dict(load("vm-fedora.yaml"))
    assert vm.spec.effective_run_strategy() is RunStrategy.ALWAYS
    assert vm.status.printable_status is PrintableStatus.RUNNING
    running = VirtualMachine.from_dict({"spec": {"running": True}})
    assert running.spec.effective_run_strategy() is RunStrategy.ALWAYS
    assert VirtualMachine().spec.effective_run_strategy() is RunStrategy.HALTED


def test_migration_accessors() -> None:
    """A migration knows its VMI key and whether it is final."""
    vmim = VirtualMachineInstanceMigration.from_dict(load("vmim.yaml"))
    assert vmim.vmi_key == "default/testvm"
    assert vmim.status.phase is MigrationPhase.SUCCEEDED
    assert vmim.is_final()
    assert not VirtualMachineInstanceMigration().is_final()


def test_new_sets_api_version_and_kind() -> None:
    """KubeObject.new fills apiVersion and kind for objects the daemons create."""
    vmi = VirtualMachineInstance.new()
    assert vmi.to_dict() == {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance"}


def test_empty_phase_is_kept_distinct_from_absent() -> None:
    """phase "" parses to VMIPhase.UNSET and renders back; absent stays absent."""
    vmi = VirtualMachineInstance.from_dict({"status": {"phase": ""}})
    assert vmi.status.phase is VMIPhase.UNSET
    assert vmi.to_dict() == {"status": {"phase": ""}}
    assert VirtualMachineInstance().status.phase_or_unset is VMIPhase.UNSET


@pytest.mark.parametrize(
    ("wire", "path"),
    [
        pytest.param(
            {"spec": {"domain": {"cpu": {"sockets": "2"}}}},
            "spec.domain.cpu.sockets",
            id="string-for-int",
        ),
        pytest.param(
            {"spec": {"domain": {"cpu": {"cores": True}}}},
            "spec.domain.cpu.cores",
            id="bool-for-int",
        ),
        pytest.param({"spec": {"volumes": {"name": "x"}}}, "spec.volumes", id="object-for-list"),
        pytest.param({"spec": {"volumes": ["x"]}}, "spec.volumes[0]", id="string-for-object"),
        pytest.param({"status": {"phase": "Exploded"}}, "status.phase", id="unknown-phase"),
        pytest.param(
            {"spec": {"runStrategy": "Sometimes"}}, "spec.runStrategy", id="unknown-run-strategy"
        ),
        pytest.param(
            {"spec": {"domain": {"memory": {"guest": 1.5}}}},
            "spec.domain.memory.guest",
            id="float-quantity",
        ),
        pytest.param(
            {"metadata": {"labels": {"a": 1}}}, "metadata.labels[a]", id="non-string-label"
        ),
        pytest.param({"spec": "oops"}, "spec", id="string-for-spec"),
    ],
)
def test_wrong_types_raise_parse_error_with_path(wire: dict[str, Any], path: str) -> None:
    """A wrongly typed value raises ParseError naming its JSON path."""
    cls: type[KubeObject] = VirtualMachine if "runStrategy" in str(wire) else VirtualMachineInstance
    with pytest.raises(ParseError) as info:
        cls.from_dict(wire)
    assert info.value.path == path
    assert path in str(info.value)


def test_int_or_string_quantities_keep_their_wire_type() -> None:
    """A quantity given as an integer stays an integer on render."""
    d = {"spec": {"domain": {"resources": {"requests": {"memory": 134217728, "cpu": 1}}}}}
    vmi = VirtualMachineInstance.from_dict(d)
    assert vmi.spec.domain.guest_memory_bytes() == 134217728
    assert vmi.to_dict() == d


def test_models_are_frozen_and_keyword_only() -> None:
    """Models cannot be mutated and take keyword arguments only."""
    vmi = VirtualMachineInstance()
    with pytest.raises(dataclasses.FrozenInstanceError):
        vmi.kind = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        VirtualMachineInstance("kubevirt.io/v1")  # type: ignore[call-arg, arg-type]
    assert not hasattr(vmi, "__dict__"), "models are slotted"
