"""containerDisk (and kernelBoot): the user's image mounted as an image volume (the
default, imagevolume.py), or, with ``--container-disk-delivery=Copy``, files copied out of
it by init containers into the pod's container-disks emptyDir (shared/podlayout.py)."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from controller.services.volumes import imagevolume
from controller.services.volumes.base import PodVolumes, RenderContext
from shared import podlayout
from shared.model import VirtualMachineInstance, Volume
from shared.model.volumes import ContainerDiskSource


def render(volume: Volume, source: ContainerDiskSource, ctx: RenderContext) -> PodVolumes:
    """The image mounted as an image volume, or one init container copying the image's
    disk to `<volume>/disk`."""
    name = volume.name or ""
    if ctx.image_volumes:
        return imagevolume.mounted(
            pod_volume=podlayout.pod_volume_name(name),
            image=source.image or "",
            pull_policy=source.image_pull_policy,
            dir_of=name,
            pull_secret=source.image_pull_secret,
        )
    files = [podlayout.CopyFile(source=source.path or None, name=podlayout.DISK_FILE)]
    copy = copy_container(
        podlayout.volume_init_container(name),
        image=source.image or "",
        pull_policy=source.image_pull_policy,
        out_dir=podlayout.volume_dir(name),
        files=files,
    )
    return PodVolumes(init_containers=(copy,), pull_secrets=_secrets(source.image_pull_secret))


def _secrets(name: str | None) -> tuple[str, ...]:
    return (name,) if name else ()


def kernel_boot(vmi: VirtualMachineInstance, ctx: RenderContext) -> PodVolumes:
    """kernelBoot's image mounted as an image volume, or the init container copying its
    kernel and initrd, when the VMI has one."""
    boot = vmi.spec.domain.kernel_boot
    if boot is None or boot.container is None:
        return PodVolumes()
    c = boot.container
    if ctx.image_volumes:
        return imagevolume.mounted(
            pod_volume=podlayout.KERNEL_BOOT_VOLUME,
            image=c.image or "",
            pull_policy=c.image_pull_policy,
            dir_of=None,
            pull_secret=c.image_pull_secret,
        )
    files = [
        podlayout.CopyFile(source=path, name=name)
        for path, name in (
            (c.kernel_path, podlayout.KERNEL_FILE),
            (c.initrd_path, podlayout.INITRD_FILE),
        )
        if path
    ]
    copy = copy_container(
        podlayout.KERNEL_BOOT_INIT_CONTAINER,
        image=c.image or "",
        pull_policy=c.image_pull_policy,
        out_dir=PurePosixPath(podlayout.KERNEL_BOOT_DIR),
        files=files,
    )
    return PodVolumes(init_containers=(copy,), pull_secrets=_secrets(c.image_pull_secret))


def copy_container(
    name: str,
    *,
    image: str,
    pull_policy: str | None,
    out_dir: PurePosixPath,
    files: list[podlayout.CopyFile],
) -> dict[str, Any]:
    """An init container running the user's image (no shell of its own needed) that
    copies `files` into the container-disks volume with the launcher's busybox."""
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "command": podlayout.copy_command(out_dir, files),
        "volumeMounts": [
            {"name": podlayout.BINARY_VOLUME, "mountPath": podlayout.BINARY_DIR, "readOnly": True},
            {"name": podlayout.CONTAINER_DISKS_VOLUME, "mountPath": podlayout.CONTAINER_DISKS_DIR},
        ],
    }
    if pull_policy:
        container["imagePullPolicy"] = str(pull_policy)
    return container
