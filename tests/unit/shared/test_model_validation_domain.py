"""VMI validation rules for metadata, memory, CPU and disks, each reported at its path."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.shared._validation_support import (
    DELETE,
    DISKS,
    messages_at,
    vmi_errors,
)

RULES = [
    # metadata
    pytest.param({"metadata.name": DELETE}, "metadata.name", "is required", id="name-missing"),
    pytest.param({"metadata.name": "vm<&'\">"}, "metadata.name", "DNS-1123", id="name-xml-meta"),
    pytest.param({"metadata.name": "Upper"}, "metadata.name", "DNS-1123", id="name-upper"),
    pytest.param({"metadata.name": "-lead"}, "metadata.name", "DNS-1123", id="name-leading-dash"),
    pytest.param({"metadata.name": "a" * 64}, "metadata.name", "at most 63", id="name-too-long"),
    pytest.param(
        {"metadata.namespace": "a.b"}, "metadata.namespace", "DNS-1123", id="namespace-not-label"
    ),
    pytest.param(
        {"metadata.labels.evil": "a\x00b"}, "metadata.labels.evil", "control", id="label-nul"
    ),
    pytest.param(
        {"metadata.annotations.x": "a\x1bb"},
        "metadata.annotations.x",
        "control",
        id="annotation-escape",
    ),
    # memory
    pytest.param(
        {"spec.domain.memory": DELETE, "spec.domain.resources.requests.memory": DELETE},
        "spec.domain.resources.requests.memory",
        "memory is required",
        id="memory-none",
    ),
    pytest.param(
        {"spec.domain.memory.guest": "-1Gi"},
        "spec.domain.memory.guest",
        "greater than 0",
        id="memory-negative",
    ),
    pytest.param(
        {"spec.domain.memory.guest": 0},
        "spec.domain.memory.guest",
        "greater than 0",
        id="memory-zero",
    ),
    pytest.param(
        {"spec.domain.memory.guest": "lots"},
        "spec.domain.memory.guest",
        "not a valid quantity",
        id="memory-garbage",
    ),
    pytest.param(
        {"spec.domain.memory.guest": "512Ki"},
        "spec.domain.memory.guest",
        "at least 1Mi",
        id="memory-tiny",
    ),
    pytest.param(
        {"spec.domain.memory.guest": "2Ti", "spec.domain.resources.limits": DELETE},
        "spec.domain.memory.guest",
        "at most 1Ti",
        id="memory-absurd",
    ),
    pytest.param(
        {"spec.domain.memory.guest": "1e30"},
        "spec.domain.memory.guest",
        "at most",
        id="memory-absurd-exponent",
    ),
    pytest.param(
        {"spec.domain.memory": DELETE, "spec.domain.resources.requests.memory": "100k"},
        "spec.domain.resources.requests.memory",
        "at least 1Mi",
        id="requests-memory-used-when-no-guest",
    ),
    pytest.param(
        {"spec.domain.memory.guest": "512Mi"},
        "spec.domain.memory.guest",
        "must not exceed spec.domain.resources.limits.memory",
        id="guest-over-limit",
    ),
    pytest.param(
        {"spec.domain.resources.requests.memory": "1Gi"},
        "spec.domain.resources.requests.memory",
        "must not exceed",
        id="request-over-limit",
    ),
    pytest.param(
        {"spec.domain.resources.limits.memory": "-1"},
        "spec.domain.resources.limits.memory",
        "greater than 0",
        id="limit-negative",
    ),
    # cpu
    pytest.param(
        {"spec.domain.cpu.sockets": 0}, "spec.domain.cpu.sockets", "at least 1", id="sockets-zero"
    ),
    pytest.param(
        {"spec.domain.cpu.cores": -1}, "spec.domain.cpu.cores", "at least 1", id="cores-negative"
    ),
    pytest.param(
        {"spec.domain.cpu.threads": 0}, "spec.domain.cpu.threads", "at least 1", id="threads-zero"
    ),
    pytest.param(
        {"spec.domain.cpu.cores": 129, "spec.domain.cpu.threads": 2},
        "spec.domain.cpu",
        "516 exceeds the maximum of 512",
        id="too-many-vcpus",
    ),
    pytest.param(
        {"spec.domain.resources.requests.cpu": "fast"},
        "spec.domain.resources.requests.cpu",
        "not a valid quantity",
        id="cpu-garbage",
    ),
    pytest.param(
        {"spec.domain.resources.limits.cpu": "-2"},
        "spec.domain.resources.limits.cpu",
        "negative",
        id="cpu-negative",
    ),
    # disks
    pytest.param(
        {f"{DISKS}[0].name": DELETE}, f"{DISKS}[0].name", "is required", id="disk-name-missing"
    ),
    pytest.param(
        {f"{DISKS}[0].name": "Root_Disk"}, f"{DISKS}[0].name", "DNS-1123", id="disk-name-invalid"
    ),
    pytest.param(
        {f"{DISKS}[3].name": "scratch"},
        f"{DISKS}[3].name",
        f"duplicate name 'scratch' (also {DISKS}[2])",
        id="disk-name-duplicate",
    ),
    pytest.param(
        {f"{DISKS}[0].cdrom": {"bus": "sata"}},
        f"{DISKS}[0]",
        "at most one of disk, cdrom, lun (found disk, cdrom)",
        id="disk-and-cdrom",
    ),
    pytest.param({f"{DISKS}[0].lun": {}}, f"{DISKS}[0]", "found disk, lun", id="disk-and-lun"),
    pytest.param(
        {f"{DISKS}[0].disk.bus": "ide"},
        f"{DISKS}[0].disk.bus",
        "sata, scsi, usb, virtio",
        id="bus-unknown",
    ),
    pytest.param(
        {f"{DISKS}[1].cdrom.bus": "virtio"},
        f"{DISKS}[1].cdrom.bus",
        "cdrom cannot use the virtio bus",
        id="cdrom-virtio",
    ),
    pytest.param(
        {f"{DISKS}[1].cdrom.bus": "floppy"},
        f"{DISKS}[1].cdrom.bus",
        "must be one of",
        id="cdrom-bus-unknown",
    ),
    pytest.param(
        {f"{DISKS}[0].bootOrder": 0}, f"{DISKS}[0].bootOrder", "at least 1", id="boot-order-zero"
    ),
    pytest.param(
        {f"{DISKS}[2].bootOrder": 1},
        f"{DISKS}[2].bootOrder",
        f"duplicate bootOrder 1 (also {DISKS}[0])",
        id="boot-order-duplicate",
    ),
    pytest.param(
        {f"{DISKS}[0].serial": "x" * 21}, f"{DISKS}[0].serial", "1-20", id="serial-too-long"
    ),
    pytest.param(
        {f"{DISKS}[0].serial": "a b"}, f"{DISKS}[0].serial", "1-20", id="serial-bad-chars"
    ),
    pytest.param(
        {f"{DISKS}[4]": {"name": "ghost", "disk": {}}},
        f"{DISKS}[4].name",
        "no volume named 'ghost'",
        id="disk-without-volume",
    ),
    pytest.param(
        {f"{DISKS}[4]": {"name": "ghost", "disk": {"bus": "scsi"}}},
        f"{DISKS}[4].name",
        "only a cdrom may have none: an empty tray; a disk's volume cannot be ejected",
        id="disk-ejected",
    ),
]


def test_a_cdrom_without_a_volume_is_an_empty_tray() -> None:
    """A cdrom disk with no volume is admitted (KubeVirt's declarative inject/eject)."""
    errors = vmi_errors({f"{DISKS}[4]": {"name": "tray", "cdrom": {"bus": "sata"}}})
    assert not [e for e in errors if e.path.startswith(f"{DISKS}[4]")], [str(e) for e in errors]


@pytest.mark.parametrize(("changes", "path", "fragment"), RULES)
def test_rule_reports_problem_at_path(changes: dict[str, Any], path: str, fragment: str) -> None:
    """Each broken rule is reported at its field path with an explaining message."""
    errors = vmi_errors(changes)
    found = messages_at(errors, path)
    assert any(fragment in m for m in found), (path, [str(e) for e in errors])
