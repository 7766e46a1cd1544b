"""Admission of CDI's DataVolumes and of a VM's dataVolumeTemplates: a source kubevirt-py
imports and a size, or the field named."""

from __future__ import annotations

from typing import Any

from virt_api.admission.validate import validate

STORAGE = {"resources": {"requests": {"storage": "64Mi"}}}


def _dv(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataVolume",
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": spec,
    }


def _paths(kind: str, obj: dict[str, Any]) -> dict[str, str]:
    return {e.path: e.message for e in validate(kind, obj)}


def test_good_datavolumes_are_admitted() -> None:
    """registry, http, pvc and blank sources with a size pass."""
    sources: list[dict[str, Any]] = [
        {"registry": {"url": "docker://registry.local/kubevirt-py/tiny-guest:v1"}},
        {"http": {"url": "http://198.18.0.9/disk.qcow2"}},
        {"pvc": {"name": "golden", "namespace": "ns"}},
        {"blank": {}},
    ]
    for source in sources:
        assert _paths("DataVolume", _dv({"source": source, "storage": STORAGE})) == {}


def test_bad_datavolumes_are_refused_naming_the_field() -> None:
    """No size, a registry URL without docker://, an s3 source are each refused at their
    field; an upload is admitted."""
    assert "spec.storage.resources.requests.storage" in _paths(
        "DataVolume", _dv({"source": {"blank": {}}, "storage": {}})
    )
    assert _paths("DataVolume", _dv({"source": {"upload": {}}, "storage": STORAGE})) == {}
    s3 = {"s3": {"url": "s3://bucket/disk"}}
    assert "spec.source.s3" in _paths("DataVolume", _dv({"source": s3, "storage": STORAGE}))
    refused = _paths("DataVolume", _dv({"source": {"registry": {"url": "x"}}, "storage": STORAGE}))
    assert "docker://<image> is required" in refused["spec.source.registry.url"]


def test_vm_templates_are_checked_as_datavolumes() -> None:
    """A VM's dataVolumeTemplates need a name and a spec a DataVolume would be admitted with."""
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "vm", "namespace": "ns"},
        "spec": {
            "dataVolumeTemplates": [
                {"metadata": {"name": "ok"}, "spec": {"source": {"blank": {}}, "storage": STORAGE}},
                {
                    "metadata": {},
                    "spec": {"source": {"s3": {"url": "s3://b/k"}}, "storage": STORAGE},
                },
            ],
            "template": {"spec": {"domain": {"devices": {}}}},
        },
    }
    refused = _paths("VirtualMachine", vm)
    assert "spec.dataVolumeTemplates[1].metadata.name" in refused
    assert "not supported" in refused["spec.dataVolumeTemplates[1].spec.source.s3"]
    assert not any(p.startswith("spec.dataVolumeTemplates[0]") for p in refused)
