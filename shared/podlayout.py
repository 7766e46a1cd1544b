"""The launcher pod's layout: the one contract between the controller's pod template and
the launcher inside the pod (volume names, mount paths, file names, init containers).

containerDisk and kernelBoot files come from real container images, as KubeVirt ships
them (a scratch image with the disk as the one file under ``/disk/``, kernel and initrd at
the paths the VMI names). Such an image has no shell and no ``cp``, so the pod copies:

1. init container ``container-disk-binary`` runs the launcher image and copies its static
   busybox into the ``container-disk-binary`` emptyDir (``BINARY_DIR``);
2. one init container per containerDisk volume (``volume<name>``) and one for kernelBoot
   (``kernel-boot``) run the user's image with that busybox as the command and copy the
   files into the ``container-disks`` emptyDir, under ``<volume>/disk`` and
   ``kernel_boot/{kernel,initrd}``;
3. the compute container mounts ``container-disks`` read-only at ``CONTAINER_DISKS_DIR``;
   the launcher's qcow2 overlay (in its private dir) uses the copy as its backing file.

That copy is the fallback (the controller's ``--container-disk-delivery=Copy``). By default
(``ImageVolume``) nothing is copied: each containerDisk image is a Kubernetes image volume
(``volumes[].image``) mounted read-only at ``IMAGE_VOLUMES_DIR/<volume>``, the kernelBoot
image at ``IMAGE_VOLUMES_DIR/kernel_boot``; the launcher takes the disk (``path``, else the
one file under ``/disk``) and the kernel/initrd at their image paths there
(``image_volume_dir``), and its qcow2 overlay uses the image's file as read-only backing.
The runtime unpacks an image once per node; every pod mounts the same layers.

persistentVolumeClaim and hostDisk volumes are pod volumes of their own (KubeVirt's
layout): each is mounted at ``VMI_DISKS_DIR/<volume>``, a claim holding its disk as
``disk.img``, a hostDisk's hostPath volume being the directory of its path, so the disk
is the path's last element there. A pod volume takes the VMI volume's name unless that is
one of the pod's own (``pod_volume_name``).

Config volumes (configMap, secret, downwardAPI, serviceAccount) are pod volumes the kubelet
fills, mounted read-only at ``PRIVATE_DIR/<kind dir>/<volume>`` (KubeVirt's source dirs);
the launcher builds an ISO of the files there. The serviceAccount's is a projected volume
(token, ca.crt, namespace: what the kubelet's automount would hold) and the pod runs as
that account. A cloud-init secretRef (networkDataSecretRef) is the Secret mounted at
``PRIVATE_DIR/secret/<volume>-udata`` (``-ndata``), as in KubeVirt.

Hotplugged claims (``hotpluggable: true``) are no pod volume of the launcher: each gets an
attachment pod ``hp-volume-<hash>`` (``attachment_pod_name``) on the VMI's node, whose
only volume is the claim, so the kubelet mounts it there. The launcher pod carries the
``hotplug-disks`` emptyDir, mounted at ``HOTPLUG_DISKS_DIR`` with ``HostToContainer``
propagation; virt-handler (pods dir mounted ``Bidirectional``) bind-mounts the claim's
``disk.img`` from the attachment pod's volume dir onto ``<volume>.img`` in that emptyDir on
the node (``hotplug_disk_file``), and the mount propagates into the running launcher,
which attaches the file to the guest. The handler unmounts it again after the detach.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

# Volumes of the launcher pod and where the compute container mounts them.
SOCKETS_VOLUME = "sockets"
SOCKETS_DIR = "/var/run/kubevirt/sockets"
# In the sockets volume: the launcher serves its commands on the init socket and renames it
# once it answers (the readiness signal the handler waits for).
LAUNCHER_INIT_SOCKET = "launcher-init-sock"
LAUNCHER_SOCKET = "launcher-sock"
PRIVATE_VOLUME = "private"
PRIVATE_DIR = "/var/run/kubevirt-private"
NOTIFY_VOLUME = "notify"
NOTIFY_SOCKET_NAME = "domain-notify.sock"
CONTAINER_DISKS_VOLUME = "container-disks"
CONTAINER_DISKS_DIR = "/var/run/kubevirt/container-disks"
BINARY_VOLUME = "container-disk-binary"
BINARY_DIR = "/var/run/kubevirt/container-disk-binary"
# Image volumes (the default delivery): containerDisk and kernelBoot images mounted here.
IMAGE_VOLUMES_DIR = "/var/run/kubevirt/image-volumes"
KERNEL_BOOT_VOLUME = "kernel-boot-image"

# How a node sees a pod's emptyDir volumes: the kubelet's layout (the node agent keeps it).
EMPTY_DIRS = PurePosixPath("volumes/kubernetes.io~empty-dir")
# Inside the `private` volume: the launcher's libvirt root, and under it the guest's serial
# console socket, VNC socket and serial log (the handler relays and reads them from the node).
LIBVIRT_ROOT = "libvirt"
CONSOLE_SOCKET_NAME = "console.sock"
VNC_SOCKET_NAME = "vnc.sock"
AGENT_SOCKET_NAME = "agent.sock"
# devices.downwardMetrics: QEMU's end of the org.github.vhostmd.1 channel (the handler dials it)
DOWNWARD_METRICS_SOCKET_NAME = "downwardmetrics.sock"
CONSOLE_SOCKET = PurePosixPath(LIBVIRT_ROOT, "run", "kvpy", CONSOLE_SOCKET_NAME)
VNC_SOCKET = PurePosixPath(LIBVIRT_ROOT, "run", "kvpy", VNC_SOCKET_NAME)
DOWNWARD_METRICS_SOCKET = PurePosixPath(LIBVIRT_ROOT, "run", "kvpy", DOWNWARD_METRICS_SOCKET_NAME)
# A downwardMetrics volume's vhostmd disk, under the private dir (the launcher makes it, the
# handler rewrites it from the node, the guest reads it): one per VMI, as in KubeVirt.
DOWNWARD_METRICS_DIR = "downwardmetrics"
DOWNWARD_METRICS_DISK = PurePosixPath(DOWNWARD_METRICS_DIR, "vhostmd0")
SERIAL_LOG = PurePosixPath(LIBVIRT_ROOT, "log", "kvpy", "serial.log")
# Under a libvirt root (the launcher's own, or a migration's dir): libvirtd's socket, and a
# migration's memory and disk streams (the handler's migration proxy bridges each).
LIBVIRT_SOCKET = PurePosixPath("sock", "libvirt-sock")
MIGRATION_MEMORY_SOCKET = PurePosixPath("run", "mig-mem.sock")
MIGRATION_DISKS_SOCKET = PurePosixPath("run", "mig-nbd.sock")

# The launcher image carries a static busybox here (Debian's busybox-static).
LAUNCHER_BUSYBOX = "/bin/busybox"
BUSYBOX = f"{BINARY_DIR}/busybox"
BINARY_INIT_CONTAINER = "container-disk-binary"
KERNEL_BOOT_INIT_CONTAINER = "kernel-boot"

# Under CONTAINER_DISKS_DIR: `<volume>/DISK_FILE` and `KERNEL_BOOT_DIR/{kernel,initrd}`.
# KERNEL_BOOT_DIR is no DNS-1123 label, so no volume can be named like it.
DISK_FILE = "disk"
KERNEL_BOOT_DIR = "kernel_boot"
KERNEL_FILE = "kernel"
INITRD_FILE = "initrd"
# Where KubeVirt's containerDisk images keep their one disk file.
IMAGE_DISK_DIR = "/disk"

MAX_CONTAINER_NAME = 63

# PVC and hostDisk volumes, under the private dir (KubeVirt's hostdisk/PVC base dir).
VMI_DISKS_SUBDIR = "vmi-disks"
VMI_DISKS_DIR = f"{PRIVATE_DIR}/{VMI_DISKS_SUBDIR}"
PVC_DISK_FILE = "disk.img"
# Block-mode claims: the pod's volumeDevices put each claim's device node here (KubeVirt
# puts them at /dev/<volume>; a directory of their own keeps volume names off /dev's).
BLOCK_DEVICES_DIR = "/dev/vmi-disks"
# Config volumes, under the private dir: `<kind dir>/<volume>` (KubeVirt's source dirs).
CONFIG_MAP_SUBDIR = "config-map"
SECRET_SUBDIR = "secret"
DOWNWARD_API_SUBDIR = "downwardapi"
SERVICE_ACCOUNT_SUBDIR = "service-account"
SYSPREP_SUBDIR = "sysprep"  # a sysprep volume's ConfigMap or Secret
USER_DATA_SUFFIX = "-udata"
NETWORK_DATA_SUFFIX = "-ndata"
# spec.accessCredentials' Secrets: `secret/<secretName>-access-cred` (KubeVirt's layout).
ACCESS_CRED_SUFFIX = "-access-cred"
# Hotplugged claims' disks, bind-mounted in by virt-handler (see the top of this file).
# The node's QEMU capability cache, made by virt-handler's `qemu-capabilities` init
# container (launcher/seed.py, launcher image) at this host path, and mounted read-only
# at the same path in launcher pods (`--capabilities-seed`).
QEMU_CAPABILITIES_VOLUME = "qemu-capabilities"
QEMU_CAPABILITIES_SEED_DIR = "/var/cache/kubevirt-py/qemu-capabilities"

HOTPLUG_DISKS_VOLUME = "hotplug-disks"
HOTPLUG_DISKS_DIR = "/var/run/kubevirt/hotplug-disks"
HOTPLUG_DISK_SUFFIX = ".img"
# Attachment pods: KubeVirt's name prefix and app label; the claim is their one volume,
# mounted at ATTACHMENT_MOUNT_DIR in their one container.
ATTACHMENT_POD_PREFIX = "hp-volume-"
ATTACHMENT_APP = "hotplug-disk"
ATTACHMENT_CONTAINER = "hotplug-disk"
ATTACHMENT_MOUNT_DIR = "/hotplug"
# Where the kubelet mounts pod volumes on the node, per volume plugin (pods/<uid>/volumes).
POD_VOLUMES = PurePosixPath("volumes")
POD_OWN_VOLUMES = frozenset(
    {
        SOCKETS_VOLUME,
        PRIVATE_VOLUME,
        NOTIFY_VOLUME,
        CONTAINER_DISKS_VOLUME,
        BINARY_VOLUME,
        HOTPLUG_DISKS_VOLUME,
        KERNEL_BOOT_VOLUME,
        "virtiofs-containers",  # VIRTIOFS_VOLUME
    }
)

# sh (busybox's) in the user's image: copy each (source, name) pair into the output dir.
# An empty source is the containerDisk convention: the one regular file under /disk.
# Paths arrive as positional arguments, never as code; each copy lands under a temporary
# name and is renamed, so a half-copied file never carries the final name.
COPY_SCRIPT = """set -eu
bb=$1; out=$2; shift 2
"$bb" mkdir -p "$out"
while [ "$#" -ge 2 ]; do
  src=$1; name=$2; shift 2
  if [ -z "$src" ]; then
    n=0
    for f in /disk/*; do
      if [ -f "$f" ]; then n=$((n + 1)); src=$f; fi
    done
    if [ "$n" -ne 1 ]; then
      echo "containerDisk: expected one file under /disk, found $n" >&2; exit 1
    fi
  fi
  "$bb" cp "$src" "$out/$name.part"
  "$bb" mv "$out/$name.part" "$out/$name"
done
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class CopyFile:
    """One file an init container copies: ``source`` in the image (None: the one file
    under /disk) to ``name`` in the output directory."""

    source: str | None
    name: str


def volume_dir(volume: str) -> PurePosixPath:
    """Where a containerDisk volume's copy lives, relative to CONTAINER_DISKS_DIR."""
    return PurePosixPath(volume)


def disk_file(volume: str) -> PurePosixPath:
    return volume_dir(volume) / DISK_FILE


def kernel_file() -> PurePosixPath:
    return PurePosixPath(KERNEL_BOOT_DIR) / KERNEL_FILE


def initrd_file() -> PurePosixPath:
    return PurePosixPath(KERNEL_BOOT_DIR) / INITRD_FILE


def image_volume_dir(volume: str | None) -> PurePosixPath:
    """Where an image volume is mounted, relative to IMAGE_VOLUMES_DIR: a containerDisk
    volume's under its name, the kernelBoot image's (volume None) under KERNEL_BOOT_DIR."""
    return PurePosixPath(KERNEL_BOOT_DIR if volume is None else volume)


def vmi_disk_dir(volume: str) -> PurePosixPath:
    """Where a PVC or hostDisk volume is mounted, relative to VMI_DISKS_DIR."""
    return PurePosixPath(volume)


def block_device(volume: str) -> PurePosixPath:
    """A block-mode claim's device node, relative to BLOCK_DEVICES_DIR."""
    return PurePosixPath(volume)


def pvc_disk_file(volume: str) -> PurePosixPath:
    """A filesystem-mode claim's disk, relative to VMI_DISKS_DIR."""
    return vmi_disk_dir(volume) / PVC_DISK_FILE


def host_disk_dir(path: str) -> str:
    """The node directory a hostDisk's hostPath volume mounts: its path's directory."""
    return str(PurePosixPath(path).parent)


def host_disk_file(volume: str, path: str) -> PurePosixPath:
    """A hostDisk's file, relative to VMI_DISKS_DIR: the path's last element in the mount."""
    return vmi_disk_dir(volume) / PurePosixPath(path).name


def pod_volume_name(volume: str) -> str:
    """The pod volume carrying a VMI volume: its own name, as in KubeVirt, unless that
    is one of the pod's own volumes (then a name derived from it that is not)."""
    if volume not in POD_OWN_VOLUMES:
        return volume
    digest = hashlib.sha256(volume.encode()).hexdigest()[:8]
    return f"vmi-{volume}-{digest}"


def config_dir(kind_subdir: str, volume: str) -> PurePosixPath:
    """Where a config volume (or a cloud-init Secret) is mounted, relative to PRIVATE_DIR."""
    return PurePosixPath(kind_subdir, volume)


def config_mount_path(kind_subdir: str, volume: str) -> str:
    """The compute container's mount path of a config volume."""
    return str(PurePosixPath(PRIVATE_DIR) / config_dir(kind_subdir, volume))


def derived_volume_name(volume: str, suffix: str) -> str:
    """A second pod volume of one VMI volume (cloud-init's `<volume>-udata`), cut with a
    hash suffix to a valid volume name."""
    name = pod_volume_name(f"{volume}{suffix}")
    if len(name) <= MAX_CONTAINER_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: MAX_CONTAINER_NAME - 9]}-{digest}"


def volume_init_container(volume: str) -> str:
    """KubeVirt's ``volume<name>``, cut with a hash suffix to a valid container name."""
    name = f"volume{volume}"
    if len(name) <= MAX_CONTAINER_NAME:
        return name
    digest = hashlib.sha256(volume.encode()).hexdigest()[:8]
    return f"{name[: MAX_CONTAINER_NAME - 9]}-{digest}"


def copy_command(out_dir: PurePosixPath, files: Sequence[CopyFile]) -> list[str]:
    """The init container's command: busybox sh running COPY_SCRIPT on the pairs."""
    pairs = [part for f in files for part in (f.source or "", f.name)]
    out = str(PurePosixPath(CONTAINER_DISKS_DIR) / out_dir)
    return [BUSYBOX, "sh", "-c", COPY_SCRIPT, "copy", BUSYBOX, out, *pairs]


def hotplug_disk_file(volume: str) -> PurePosixPath:
    """A hotplugged volume's disk file, relative to HOTPLUG_DISKS_DIR (and to the node's
    view of the launcher pod's hotplug-disks emptyDir)."""
    return PurePosixPath(f"{volume}{HOTPLUG_DISK_SUFFIX}")


def hotplug_disks_on_node(pod_uid: str) -> PurePosixPath:
    """The launcher pod's hotplug-disks emptyDir, relative to the kubelet's pods dir."""
    return PurePosixPath(pod_uid) / EMPTY_DIRS / HOTPLUG_DISKS_VOLUME


def attachment_pod_name(vmi_uid: str, volume: str) -> str:
    """The attachment pod of one hotplugged volume of one VMI (stable, so a create is
    idempotent)."""
    digest = hashlib.sha256(f"{vmi_uid}/{volume}".encode()).hexdigest()[:10]
    return f"{ATTACHMENT_POD_PREFIX}{digest}"


# memory.hugepages: a hugetlbfs emptyDir (medium HugePages-<size>) at KubeVirt's path; the
# launcher's libvirt backs guest memory with files there (launcher/pinning.py).
HUGEPAGES_VOLUME = "hugepages"
HUGEPAGES_DIR = "/dev/hugepages"
# devices.filesystems: the emptyDir where each virtiofs-<name> container's virtiofsd makes
# its socket (shared/virtiofs.py), mounted in the compute container too (KubeVirt's path).
VIRTIOFS_VOLUME = "virtiofs-containers"
VIRTIOFS_DIR = "/var/run/kubevirt/virtiofs-containers"
