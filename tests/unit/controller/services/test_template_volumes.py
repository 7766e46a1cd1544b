"""PVC and hostDisk volumes in the launcher pod (controller/volumes): each a pod volume
mounted at vmi-disks/<volume>, where the launcher looks (KubeVirt's layout); a readOnly
claim mounted read-only; the claim's size handed to the launcher."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from controller.config import TemplateConfig
from controller.services import volumes
from controller.services.template import TemplateService
from controller.services.volumes.claims import Claim
from shared import podlayout
from shared.model.volumes import VolumeSource
from tests.unit.controller.builders import make_vmi, vmi_dict
from tests.unit.controller.services.test_template import IMAGE, compute, parse_launcher_args

VMI_DISKS = "/var/run/kubevirt-private/vmi-disks"


def _raw(*vols: dict[str, Any]) -> dict[str, Any]:
    raw = vmi_dict()
    raw["spec"]["domain"]["devices"]["disks"] = [
        {"name": v["name"], "disk": {"bus": "virtio"}} for v in vols
    ]
    raw["spec"]["volumes"] = list(vols)
    return raw


def _pod(raw: dict[str, Any], claims: dict[str, Claim] | None = None) -> dict[str, Any]:
    service = TemplateService(TemplateConfig(launcher_image=IMAGE))
    return service.launcher_pod(make_vmi(raw=raw), claims=claims)


def _volume(pod: dict[str, Any], name: str) -> dict[str, Any]:
    found = [v for v in pod["spec"]["volumes"] if v["name"] == name]
    assert len(found) == 1, pod["spec"]["volumes"]
    return dict(found[0])


def _mount(pod: dict[str, Any], name: str) -> dict[str, Any]:
    found = [m for m in compute(pod)["volumeMounts"] if m["name"] == name]
    assert len(found) == 1
    return dict(found[0])


def test_the_shared_layout_is_kubevirts() -> None:
    """PVC and hostDisk volumes live where KubeVirt's launcher finds them."""
    assert podlayout.VMI_DISKS_DIR == VMI_DISKS
    assert str(podlayout.pvc_disk_file("v")) == "v/disk.img"
    assert str(podlayout.host_disk_file("v", "/var/data/x.img")) == "v/x.img"


def test_every_source_that_needs_the_pod_has_a_renderer() -> None:
    """Renderers are keyed by the model's typed sources; only emptyDisk and
    downwardMetrics (disks the launcher makes in its scratch) and memoryDump (hot-plugged
    through an attachment pod) need nothing from the pod (cloud-init may name Secrets)."""
    typed = set(typing.get_args(VolumeSource))
    assert set(volumes.RENDERERS) <= typed
    unrendered = {t.__name__ for t in typed - set(volumes.RENDERERS)}
    assert unrendered == {
        "EmptyDiskSource", "DownwardMetricsVolumeSource", "MemoryDumpVolumeSource"
    }  # fmt: skip


def test_a_pvc_is_a_pod_volume_mounted_where_the_launcher_looks() -> None:
    """persistentVolumeClaim → a pod volume of the claim, mounted read-write at
    vmi-disks/<volume>; the claim's size reaches the launcher."""
    claim = Claim(
        name="mypvc", phase="Bound", volume_mode="Filesystem", request_bytes=1, capacity_bytes=2048
    )
    pod = _pod(
        _raw({"name": "pvcdisk", "persistentVolumeClaim": {"claimName": "mypvc"}}),
        {"mypvc": claim},
    )
    assert _volume(pod, "pvcdisk") == {
        "name": "pvcdisk",
        "persistentVolumeClaim": {"claimName": "mypvc"},
    }
    assert _mount(pod, "pvcdisk") == {"name": "pvcdisk", "mountPath": f"{VMI_DISKS}/pvcdisk"}
    args = compute(pod)["args"]
    assert args[args.index("--claim-capacity") + 1] == "pvcdisk=2048"
    parse_launcher_args(args)  # the launcher's parser takes them


def test_a_read_only_claim_is_mounted_read_only() -> None:
    """readOnly on the volume → readOnly on the claim and on the mount."""
    pod = _pod(_raw({"name": "ro", "persistentVolumeClaim": {"claimName": "c", "readOnly": True}}))
    assert _volume(pod, "ro")["persistentVolumeClaim"] == {"claimName": "c", "readOnly": True}
    assert _mount(pod, "ro")["readOnly"] is True
    assert "--claim-capacity" not in compute(pod)["args"]  # no claim read: no size


@pytest.mark.parametrize(
    ("kind", "host_type"), [("Disk", "Directory"), ("DiskOrCreate", "DirectoryOrCreate")]
)
def test_a_host_disk_mounts_its_directory_from_the_node(kind: str, host_type: str) -> None:
    """hostDisk → a hostPath volume of the path's directory (Directory for Disk,
    DirectoryOrCreate for DiskOrCreate) mounted at vmi-disks/<volume>."""
    source = {"path": "/var/data/disk.img", "type": kind, "capacity": "1Gi"}
    pod = _pod(_raw({"name": "host-disk", "hostDisk": source}))
    assert _volume(pod, "host-disk")["hostPath"] == {"path": "/var/data", "type": host_type}
    assert _mount(pod, "host-disk")["mountPath"] == f"{VMI_DISKS}/host-disk"


def test_a_volume_named_like_a_pod_volume_gets_its_own_pod_volume() -> None:
    """A VMI volume called `private` does not clash with the pod's own `private`."""
    pod = _pod(_raw({"name": "private", "persistentVolumeClaim": {"claimName": "c"}}))
    names = [v["name"] for v in pod["spec"]["volumes"]]
    assert len(names) == len(set(names))
    renamed = podlayout.pod_volume_name("private")
    assert _mount(pod, renamed)["mountPath"] == f"{VMI_DISKS}/private"
