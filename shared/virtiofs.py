"""The contract between the controller's `virtiofs-<name>` containers and the launcher's
domain (devices.filesystems, shared/model/filesystems.py): where each filesystem's virtiofsd
listens and how its container is named."""

from __future__ import annotations

from pathlib import PurePosixPath

from shared import podlayout
from shared.naming import fit

CONTAINER_PREFIX = "virtiofs-"
# The Rust virtiofsd in the launcher image (images/Containerfile.launcher).
VIRTIOFSD = "/usr/libexec/virtiofsd"


def container_name(filesystem: str) -> str:
    """`virtiofs-<name>`, cut with a hash to a container name's 63 characters."""
    return fit(f"{CONTAINER_PREFIX}{filesystem}", limit=podlayout.MAX_CONTAINER_NAME)


def socket_path(filesystem: str) -> PurePosixPath:
    """The vhost-user socket of a filesystem's virtiofsd, in the shared emptyDir."""
    return PurePosixPath(podlayout.VIRTIOFS_DIR) / f"{filesystem}.sock"
