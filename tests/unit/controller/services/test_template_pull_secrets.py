"""containerDisk and kernelBoot `imagePullSecret`: the launcher pod lists each Secret once in
its imagePullSecrets (as KubeVirt does), so the kubelet pulls the image volumes (or, with
the copy fallback, the init containers' images) with it."""

from __future__ import annotations

from typing import Any

import pytest

from controller.config import ContainerDiskDelivery, TemplateConfig
from controller.services.template import TemplateService
from tests.unit.controller.builders import make_vmi, vmi_dict
from tests.unit.controller.services.test_template import IMAGE
from tests.unit.controller.services.test_template_disks import _vmi

DELIVERIES = [
    pytest.param(ContainerDiskDelivery.IMAGE_VOLUME, id="image-volume"),
    pytest.param(ContainerDiskDelivery.COPY, id="copy"),
]


def _pod(raw: dict[str, Any], delivery: ContainerDiskDelivery) -> dict[str, Any]:
    config = TemplateConfig(launcher_image=IMAGE, container_disk_delivery=delivery)
    return TemplateService(config).launcher_pod(make_vmi(raw=raw))


def _with_secrets(disk: str | None, kernel: str | None) -> dict[str, Any]:
    raw = _vmi()
    if disk:
        raw["spec"]["volumes"][0]["containerDisk"]["imagePullSecret"] = disk
    if kernel:
        raw["spec"]["domain"]["firmware"]["kernelBoot"]["container"]["imagePullSecret"] = kernel
    return raw


@pytest.mark.parametrize("delivery", DELIVERIES)
def test_both_images_secrets_are_the_pods_pull_secrets(delivery: ContainerDiskDelivery) -> None:
    """The containerDisk's Secret, then kernelBoot's, in the pod's imagePullSecrets."""
    pod = _pod(_with_secrets("disk-cred", "kernel-cred"), delivery)
    assert pod["spec"]["imagePullSecrets"] == [{"name": "disk-cred"}, {"name": "kernel-cred"}]


@pytest.mark.parametrize("delivery", DELIVERIES)
def test_a_secret_named_twice_is_listed_once(delivery: ContainerDiskDelivery) -> None:
    """Two images pulled with the same Secret: one entry."""
    pod = _pod(_with_secrets("regcred", "regcred"), delivery)
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]


def test_the_kernel_secret_alone_is_listed() -> None:
    """Only kernelBoot names a Secret: it is the pod's one pull secret."""
    pod = _pod(_with_secrets(None, "kernel-cred"), ContainerDiskDelivery.IMAGE_VOLUME)
    assert pod["spec"]["imagePullSecrets"] == [{"name": "kernel-cred"}]


def test_no_secret_no_pull_secrets() -> None:
    """Images without a Secret (or no image at all): the pod has no imagePullSecrets."""
    for raw in (_vmi(), vmi_dict()):
        pod = _pod(raw, ContainerDiskDelivery.IMAGE_VOLUME)
        assert "imagePullSecrets" not in pod["spec"]
