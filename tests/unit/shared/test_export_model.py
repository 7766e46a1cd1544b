"""The VirtualMachineExport model: KubeVirt's wire shape round-trips, Go durations parse,
and admission's check names the bad field."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from shared.model.export import (
    ExportFormat,
    ExportPhase,
    VirtualMachineExport,
    export_errors,
    export_names,
    parse_duration,
    volume_path,
)


def vme(source: dict[str, Any] | None, **spec: Any) -> VirtualMachineExport:
    body: dict[str, Any] = {"source": source} if source is not None else {}
    return VirtualMachineExport.from_dict(
        {
            "apiVersion": "export.kubevirt.io/v1beta1",
            "kind": "VirtualMachineExport",
            "metadata": {"name": "exp", "namespace": "ns"},
            "spec": {**body, **spec},
        }
    )


PVC = {"apiGroup": "", "kind": "PersistentVolumeClaim", "name": "disk"}


def test_status_as_kubevirt_writes_it_round_trips() -> None:
    """A Ready export's status (links with formats, token, TTL, conditions) parses and renders
    back unchanged."""
    raw = {
        "apiVersion": "export.kubevirt.io/v1beta1",
        "kind": "VirtualMachineExport",
        "metadata": {"name": "exp", "namespace": "ns"},
        "spec": {"source": PVC, "tokenSecretRef": "t", "ttlDuration": "1h"},
        "status": {
            "phase": "Ready",
            "links": {"internal": {"cert": "PEM", "volumes": [{"name": "disk", "formats": [
                {"format": "raw", "url": "https://s.ns.svc/volumes/disk/disk.img"},
                {"format": "gzip", "url": "https://s.ns.svc/volumes/disk/disk.img.gz"}]}]}},
            "tokenSecretRef": "t",
            "ttlExpirationTime": "2026-01-01T01:00:00Z",
            "serviceName": "s",
            "conditions": [{"type": "Ready", "status": "True", "reason": "PodReady"}],
        },
    }  # fmt: skip
    parsed = VirtualMachineExport.from_dict(raw)
    assert parsed.to_dict() == raw
    assert parsed.phase is ExportPhase.READY
    link = parsed.status.links.internal if parsed.status.links else None
    assert link is not None
    volume = link.volume(None)
    assert volume is not None
    assert volume.url(ExportFormat.GZIP) == "https://s.ns.svc/volumes/disk/disk.img.gz"
    assert link.volume("other") is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2h", 7200), ("1h30m", 5400), ("90s", 90), ("1.5h", 5400), ("500ms", 0.5)],
)
def test_go_durations_parse(text: str, seconds: float) -> None:
    """ttlDuration is a Go duration, as metav1.Duration reads it."""
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "soon", "10", "1d", "h1"])
def test_non_durations_are_refused(text: str) -> None:
    """Anything else is a ValueError."""
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_admission_accepts_claim_vm_and_snapshot_sources() -> None:
    """A claim (core group), a VM (kubevirt.io) or a VirtualMachineSnapshot
    (snapshot.kubevirt.io) with a name and a good TTL pass."""
    assert export_errors(vme(PVC, ttlDuration="10m")) == []
    assert (
        export_errors(vme({"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": "v"})) == []
    )
    snap = {"apiGroup": "snapshot.kubevirt.io", "kind": "VirtualMachineSnapshot", "name": "s"}
    assert export_errors(vme(snap)) == []


@pytest.mark.parametrize(
    ("source", "spec", "path"),
    [
        (None, {}, "spec.source.kind"),
        ({"kind": "ConfigMap", "name": "x"}, {}, "spec.source.kind"),
        ({"kind": "VirtualMachineSnapshot", "name": "x"}, {}, "spec.source.apiGroup"),
        ({"apiGroup": "apps", "kind": "VirtualMachine", "name": "x"}, {}, "spec.source.apiGroup"),
        ({"kind": "PersistentVolumeClaim"}, {}, "spec.source.name"),
        (PVC, {"ttlDuration": "soon"}, "spec.ttlDuration"),
        (PVC, {"ttlDuration": "0s"}, "spec.ttlDuration"),
    ],
)
def test_admission_refusals_name_the_field(
    source: dict[str, Any] | None, spec: dict[str, Any], path: str
) -> None:
    """Each bad input is refused naming its field."""
    assert path in [e.path for e in export_errors(vme(source, **spec))]


def test_names_and_paths_are_kubevirts() -> None:
    """virt-export-<name> (dots replaced) for the pod and the Service; KubeVirt's URL paths."""
    assert export_names("a.b") == ("virt-export-a-b", "virt-export-a-b")
    assert volume_path("disk", ExportFormat.RAW) == "/volumes/disk/disk.img"
    assert volume_path("disk", ExportFormat.GZIP) == "/volumes/disk/disk.img.gz"
