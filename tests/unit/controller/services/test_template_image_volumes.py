"""The default delivery of containerDisk and kernelBoot images: Kubernetes image volumes
(`volumes[].image`) mounted read-only where the launcher reads them, with the image's pull
policy; no init container and no copy volume (shared/podlayout.py)."""

from __future__ import annotations

import pytest

from controller.config import Config, ContainerDiskDelivery, TemplateConfig
from controller.errors import ConfigError
from controller.services.template import TemplateService
from shared import podlayout
from tests.unit.controller.builders import make_vmi, vmi_dict
from tests.unit.controller.services.test_template import IMAGE, compute
from tests.unit.controller.services.test_template_disks import GUEST, _vmi

ROOT = podlayout.IMAGE_VOLUMES_DIR


def _pod(raw: dict[str, object]) -> dict[str, object]:
    return TemplateService(TemplateConfig(launcher_image=IMAGE)).launcher_pod(make_vmi(raw=raw))


def test_images_are_read_only_image_volumes_and_nothing_is_copied() -> None:
    """Each containerDisk is an image volume named as its VMI volume and the kernelBoot
    image one of its own, each mounted read-only under the image-volumes dir; the pod has
    no init container, no busybox and no container-disks volume."""
    pod = _pod(_vmi())
    spec = pod["spec"]
    assert isinstance(spec, dict)
    assert spec["initContainers"] == []
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["containerdisk"] == {
        "name": "containerdisk", "image": {"reference": GUEST, "pullPolicy": "Never"},
    }  # fmt: skip
    assert volumes[podlayout.KERNEL_BOOT_VOLUME] == {
        "name": podlayout.KERNEL_BOOT_VOLUME, "image": {"reference": GUEST},
    }  # fmt: skip
    assert podlayout.CONTAINER_DISKS_VOLUME not in volumes
    assert podlayout.BINARY_VOLUME not in volumes
    mounts = {m["name"]: m for m in compute(pod)["volumeMounts"]}
    assert mounts["containerdisk"] == {
        "name": "containerdisk", "mountPath": f"{ROOT}/containerdisk", "readOnly": True,
    }  # fmt: skip
    assert mounts[podlayout.KERNEL_BOOT_VOLUME] == {
        "name": podlayout.KERNEL_BOOT_VOLUME,
        "mountPath": f"{ROOT}/{podlayout.KERNEL_BOOT_DIR}",
        "readOnly": True,
    }
    assert podlayout.CONTAINER_DISKS_VOLUME not in mounts


def test_a_volume_named_like_a_pod_volume_gets_another_pod_volume_name() -> None:
    """A containerDisk volume named `kernel-boot-image` (or `sockets`) does not clash with
    the pod's own volumes; it is still mounted under its VMI volume's name."""
    pod = _pod(_vmi(volume=podlayout.KERNEL_BOOT_VOLUME))
    name = podlayout.pod_volume_name(podlayout.KERNEL_BOOT_VOLUME)
    assert name != podlayout.KERNEL_BOOT_VOLUME
    mounts = {m["name"]: m for m in compute(pod)["volumeMounts"]}
    assert mounts[name]["mountPath"] == f"{ROOT}/{podlayout.KERNEL_BOOT_VOLUME}"
    assert mounts[podlayout.KERNEL_BOOT_VOLUME]["mountPath"] == f"{ROOT}/kernel_boot"


def test_a_vmi_without_images_gets_no_image_volume() -> None:
    """No containerDisk and no kernelBoot: no image volume, no init container."""
    pod = _pod(vmi_dict())
    spec = pod["spec"]
    assert isinstance(spec, dict)
    assert spec["initContainers"] == []
    assert not [v for v in spec["volumes"] if "image" in v]


def test_the_delivery_is_a_controller_setting() -> None:
    """ImageVolume by default; Copy from the flag or VIRT_CONTROLLER_CONTAINER_DISK_DELIVERY;
    anything else a clear error naming the flag."""
    assert Config.from_args([], {}).template.container_disk_delivery == "ImageVolume"
    env = {"VIRT_CONTROLLER_CONTAINER_DISK_DELIVERY": "Copy"}
    assert Config.from_args([], env).template.container_disk_delivery == ContainerDiskDelivery.COPY
    with pytest.raises(
        ConfigError, match="--container-disk-delivery must be one of ImageVolume, Copy"
    ):
        Config.from_args(["--container-disk-delivery", "Mount"], {})
