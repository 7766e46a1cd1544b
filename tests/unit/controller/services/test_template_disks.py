"""The copy fallback (`--container-disk-delivery=Copy`, runtimes without image volumes):
the launcher pod's containerDisk and kernelBoot init containers, busybox out of the
launcher image, then one copy per image into the container-disks volume, laid out as the
launcher reads it (shared/podlayout.py). The default, image volumes, is
test_template_image_volumes.py."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from controller.config import ContainerDiskDelivery, TemplateConfig
from controller.services.template import TemplateService
from shared import podlayout
from tests.unit.controller.builders import make_vmi, vmi_dict
from tests.unit.controller.services.test_template import IMAGE, compute, parse_launcher_args

GUEST = "registry.local/kubevirt-py/tiny-guest:v1"


def _vmi(*, disk_path: str | None = None, volume: str = "containerdisk") -> dict[str, Any]:
    raw = vmi_dict()
    cd: dict[str, Any] = {"image": GUEST, "imagePullPolicy": "Never"}
    if disk_path:
        cd["path"] = disk_path
    raw["spec"]["domain"]["devices"]["disks"] = [{"name": volume, "disk": {"bus": "virtio"}}]
    raw["spec"]["domain"]["firmware"] = {
        "kernelBoot": {
            "kernelArgs": "console=ttyS0",
            "container": {
                "image": GUEST,
                "kernelPath": "/boot/vmlinuz",
                "initrdPath": "/boot/initrd.img",
            },
        }
    }
    raw["spec"]["volumes"] = [{"name": volume, "containerDisk": cd}]
    return raw


def _pod(raw: dict[str, Any]) -> dict[str, Any]:
    config = TemplateConfig(
        launcher_image=IMAGE, container_disk_delivery=ContainerDiskDelivery.COPY
    )
    return TemplateService(config).launcher_pod(make_vmi(raw=raw))


def _inits(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in pod["spec"]["initContainers"]}


def _pairs(container: dict[str, Any]) -> tuple[str, list[str]]:
    """(output dir, [source, name, ...]) of a copy container's command."""
    command = container["command"]
    assert command[:3] == [podlayout.BUSYBOX, "sh", "-c"]
    assert command[3] == podlayout.COPY_SCRIPT
    assert command[4:6] == ["copy", podlayout.BUSYBOX]
    return command[6], command[7:]


def test_busybox_comes_first_from_the_launcher_image() -> None:
    """The first init container runs the launcher image and copies its static busybox
    into the binary volume, where the later copies run it from."""
    pod = _pod(_vmi())
    first = pod["spec"]["initContainers"][0]
    assert first["name"] == podlayout.BINARY_INIT_CONTAINER
    assert first["image"] == IMAGE
    assert first["command"] == ["/bin/busybox", "cp", "/bin/busybox", podlayout.BUSYBOX]
    assert first["volumeMounts"] == [
        {"name": podlayout.BINARY_VOLUME, "mountPath": podlayout.BINARY_DIR}
    ]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes[podlayout.BINARY_VOLUME] == {"name": podlayout.BINARY_VOLUME, "emptyDir": {}}


def test_each_container_disk_and_the_kernel_are_copied_from_the_users_image() -> None:
    """One init container per containerDisk (`volume<name>`) and one for kernelBoot run
    the user's image with the copied busybox, with the image's pull policy, writing under
    the names the launcher reads; the one file under /disk when no path is named."""
    inits = _inits(_pod(_vmi()))
    assert list(inits) == ["container-disk-binary", "volumecontainerdisk", "kernel-boot"]
    disk = inits["volumecontainerdisk"]
    assert disk["image"] == GUEST and disk["imagePullPolicy"] == "Never"
    assert _pairs(disk) == (f"{podlayout.CONTAINER_DISKS_DIR}/containerdisk", ["", "disk"])
    kernel = inits["kernel-boot"]
    assert kernel["image"] == GUEST and "imagePullPolicy" not in kernel
    assert _pairs(kernel) == (
        f"{podlayout.CONTAINER_DISKS_DIR}/{podlayout.KERNEL_BOOT_DIR}",
        ["/boot/vmlinuz", "kernel", "/boot/initrd.img", "initrd"],
    )
    for c in (disk, kernel):
        assert c["volumeMounts"] == [
            {"name": podlayout.BINARY_VOLUME, "mountPath": podlayout.BINARY_DIR, "readOnly": True},
            {"name": podlayout.CONTAINER_DISKS_VOLUME, "mountPath": podlayout.CONTAINER_DISKS_DIR},
        ]


def test_a_named_disk_path_is_copied_instead_of_the_disk_dir() -> None:
    """containerDisk.path names the file to copy."""
    inits = _inits(_pod(_vmi(disk_path="/custom/my.qcow2")))
    assert _pairs(inits["volumecontainerdisk"])[1] == ["/custom/my.qcow2", "disk"]


def test_the_compute_container_reads_the_copies_where_the_launcher_looks() -> None:
    """container-disks is an emptyDir, mounted read-only in compute at the directory the
    launcher's --container-disks-dir names."""
    pod = _pod(_vmi())
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes[podlayout.CONTAINER_DISKS_VOLUME]["emptyDir"] == {}
    mounts = {m["name"]: m for m in compute(pod)["volumeMounts"]}
    mount = mounts[podlayout.CONTAINER_DISKS_VOLUME]
    assert mount["readOnly"] is True
    args = parse_launcher_args(compute(pod)["args"])
    assert args["container_disks_dir"] == mount["mountPath"] == podlayout.CONTAINER_DISKS_DIR


def test_a_vmi_without_images_gets_only_the_busybox_copy() -> None:
    """No containerDisk and no kernelBoot: nothing to copy but busybox."""
    assert list(_inits(_pod(vmi_dict()))) == [podlayout.BINARY_INIT_CONTAINER]


def test_long_volume_names_still_give_valid_distinct_container_names() -> None:
    """`volume<63-char name>` is cut to 63 characters with a hash, distinct per volume."""
    a, b = "a" * 62 + "b", "a" * 62 + "c"
    names = {podlayout.volume_init_container(v) for v in (a, b)}
    assert len(names) == 2 and all(len(n) <= 63 for n in names)
    assert podlayout.volume_init_container("disk0") == "volumedisk0"


@pytest.mark.parametrize("missing", [False, True], ids=["copies", "missing-source-fails"])
def test_the_copy_script_copies_under_the_final_names(tmp_path: Path, missing: bool) -> None:
    """Run with the host's static busybox: each source lands under its name (no `.part`
    left); a missing source fails the container with a non-zero exit."""
    (tmp_path / "vmlinuz").write_bytes(b"kernel")
    source = tmp_path / ("absent" if missing else "vmlinuz")
    out = tmp_path / "out" / "kernel_boot"
    result = subprocess.run(
        ["/bin/busybox", "sh", "-c", podlayout.COPY_SCRIPT, "copy", "/bin/busybox", str(out),
         str(source), "kernel"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    if missing:
        assert result.returncode != 0
        assert not (out / "kernel").exists()
    else:
        assert result.returncode == 0, result.stderr
        assert (out / "kernel").read_bytes() == b"kernel"
        assert sorted(p.name for p in out.iterdir()) == ["kernel"]
