"""When the CSI driver clones a pvc-source DataVolume (the claim's dataSource) and when a
pod copies it instead."""

from __future__ import annotations

from typing import Any

from controller.datavolume.csiclone import clone_source
from shared.kube import CSIDRIVERS, PVCS, NotFound, Resource
from shared.kube.api_types import ListResult
from shared.model.datavolume import DataVolume
from shared.model.datavolume_spec import target

SIZE = {"resources": {"requests": {"storage": "64Mi"}}}


class FakeClient:
    """The three reads clone_source makes."""

    def __init__(self, *, source_class: str = "csi", mode: str = "Immediate") -> None:
        self.source = {"spec": {"storageClassName": source_class, **SIZE}}
        self.classes = [
            {
                "metadata": {
                    "name": "csi",
                    "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
                },
                "provisioner": "csi.example",
                "volumeBindingMode": mode,
            },
            {"metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner"},
        ]

    async def get(self, resource: Resource, name: str, **_: Any) -> dict[str, Any]:
        if resource is PVCS and name == "golden":
            return self.source
        if resource is CSIDRIVERS and name == "csi.example":
            return {}
        raise NotFound(404, "NotFound", f"{resource.plural}/{name}")

    async def list_all(self, resource: Resource, **_: Any) -> ListResult:
        return ListResult(items=self.classes, resource_version="1")


def _dv(**storage: Any) -> DataVolume:
    return DataVolume.from_dict(
        {
            "metadata": {"name": "clone", "namespace": "ns"},
            "spec": {"source": {"pvc": {"name": "golden"}}, "storage": {**SIZE, **storage}},
        }
    )


async def _source(client: FakeClient, dv: DataVolume) -> dict[str, Any] | None:
    return await clone_source(client, dv, target(dv))  # type: ignore[arg-type]


async def test_same_csi_class_is_cloned_by_the_driver() -> None:
    """Both claims in the default CSI class, binding Immediate: the dataSource."""
    assert await _source(FakeClient(), _dv()) == {"kind": "PersistentVolumeClaim", "name": "golden"}


async def test_other_cases_are_copied_by_a_pod() -> None:
    """Another class, a class without a CSI driver, WaitForFirstConsumer, a smaller claim
    or a missing source: no dataSource."""
    assert await _source(FakeClient(), _dv(storageClassName="local")) is None
    assert await _source(FakeClient(source_class="local"), _dv(storageClassName="local")) is None
    assert await _source(FakeClient(mode="WaitForFirstConsumer"), _dv()) is None
    small = _dv(resources={"requests": {"storage": "32Mi"}})
    assert await _source(FakeClient(), small) is None
    missing = DataVolume.from_dict(
        {"metadata": {"name": "c", "namespace": "ns"},
         "spec": {"source": {"pvc": {"name": "nope"}}, "storage": SIZE}}
    )  # fmt: skip
    assert await _source(FakeClient(), missing) is None
