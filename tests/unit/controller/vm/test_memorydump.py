"""A VM's memory dump request through its phases (controller/vm/memorydump.py): the
memoryDump volume added to the running VMI, the handler's outcome copied, the volume
removed, the claim annotated, the request dropped on removal."""

from __future__ import annotations

from typing import Any

import pytest

from controller.vm.memorydump import claim_annotation, next_request, vmi_ops
from shared.model import VirtualMachine, VirtualMachineInstance

DUMP = {"name": "dump", "memoryDump": {"claimName": "dump", "hotpluggable": True}}
FILE = "vm-dump-20261129-140506.memory.dump"


def _vm(phase: str, **more: Any) -> VirtualMachine:
    request = {"claimName": "dump", "phase": phase, **more}
    return VirtualMachine.from_dict(
        {"metadata": {"name": "vm", "namespace": "ns"}, "status": {"memoryDumpRequest": request}}
    )


def _vmi(*, volume: bool, entry: dict[str, Any] | None = None, phase: str = "Running") -> Any:
    return VirtualMachineInstance.from_dict({
        "metadata": {"name": "vm", "namespace": "ns"},
        "spec": {"volumes": [{"name": "disk", "containerDisk": {"image": "x"}},
                             *([DUMP] if volume else [])]},
        "status": {"phase": phase, "volumeStatus": [entry] if entry else []},
    })  # fmt: skip


def test_associating_adds_the_volume_to_the_running_vmi_then_is_in_progress() -> None:
    """Associating: the memoryDump volume (named after the claim, hotpluggable) appended
    with a test of the list; InProgress once the VMI has it."""
    ops = vmi_ops(_vm("Associating"), _vmi(volume=False))
    assert ops[0]["op"] == "test" and ops[1]["value"][-1] == DUMP
    assert vmi_ops(_vm("Associating"), _vmi(volume=False, phase="Scheduling")) == []
    request = next_request(_vm("Associating"), _vmi(volume=True))
    assert request is not None and request.phase == "InProgress"


@pytest.mark.parametrize(
    ("volume_phase", "phase", "file"),
    [
        pytest.param("MemoryDumpCompleted", "Unmounting", FILE, id="completed"),
        pytest.param("MemoryDumpFailed", "Failed", None, id="failed"),
        pytest.param("MemoryDumpInProgress", "InProgress", None, id="running"),
    ],
)
def test_in_progress_follows_the_handlers_outcome(
    volume_phase: str, phase: str, file: str | None
) -> None:
    """The volume's MemoryDumpCompleted → Unmounting with the file and times; Failed → Failed
    with the handler's message; still running → unchanged."""
    info = {"claimName": "dump", "targetFileName": FILE, "startTimestamp": "t0",
            "endTimestamp": "t1"}  # fmt: skip
    entry = {"name": "dump", "phase": volume_phase, "message": "why", "memoryDumpVolume": info}
    request = next_request(_vm("InProgress"), _vmi(volume=True, entry=entry))
    assert request is not None
    assert (request.phase, request.file_name, request.start_timestamp) == (phase, file, "t0")
    if phase == "Failed":
        assert request.message == "why"


def test_a_vmi_gone_mid_dump_fails_the_request() -> None:
    """No running VMI while InProgress: Failed, saying so."""
    request = next_request(_vm("InProgress"), None)
    assert request is not None and request.phase == "Failed"
    assert "stopped before the memory dump completed" in (request.message or "")


def test_unmounting_removes_the_volume_annotates_the_claim_then_completes() -> None:
    """Unmounting: the volume removed from the VMI, the claim's annotation is the file;
    Completed once the handler let go of the volume."""
    vm = _vm("Unmounting", fileName=FILE)
    ops = vmi_ops(vm, _vmi(volume=True))
    assert [v["name"] for v in ops[1]["value"]] == ["disk"]
    assert claim_annotation(vm) == FILE
    held = {"name": "dump", "phase": "Detaching"}
    assert next_request(vm, _vmi(volume=False, entry=held)).phase == "Unmounting"  # type: ignore[union-attr]
    assert next_request(vm, _vmi(volume=False)).phase == "Completed"  # type: ignore[union-attr]
    assert claim_annotation(_vm("Failed")) == "Memory dump failed"


def test_remove_dissociates_then_drops_the_request() -> None:
    """remove: Dissociating, the volume removed; the request gone once nothing holds it."""
    vm = _vm("Completed", remove=True)
    assert next_request(vm, _vmi(volume=True)).phase == "Dissociating"  # type: ignore[union-attr]
    assert vmi_ops(vm, _vmi(volume=True))[1]["value"] == [
        {"name": "disk", "containerDisk": {"image": "x"}}
    ]
    assert next_request(_vm("Dissociating", remove=True), _vmi(volume=False)) is None
