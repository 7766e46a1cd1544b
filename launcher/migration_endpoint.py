"""A migration target's endpoint: what the source reaches it by.

libvirt's peer-to-peer migration needs three things reachable from the
source: the target's libvirtd socket (the source daemon drives the destination), the
memory stream and the disk (NBD) stream, both Unix sockets the destination QEMU binds.
They all live under the target's private dir, whose host path is long (kubelet pod
paths pass sun_path's 108 bytes) and, inside pods, is a per-pod bind mount that the
source's namespace cannot see. So the target makes one short symlink,
`/var/run/kubevirt-py/mig/<id>` → `/proc/<target launcher pid>/root<private>/libvirt`:
short enough for every socket under it, and `/proc/<pid>/root` resolves the rest in the
target's own mount namespace. (The `/proc/self/fd/<dirfd>` trick of shared.wire.unixpath
cannot work here: the paths are used by other processes — libvirtd and QEMU.) This needs
one host and one pid namespace; across hosts a per-migration proxy carries the streams
instead (docs/migration.md).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from launcher.daemonpaths import driver_path
from shared import podlayout

LINK_ROOT = Path("/var/run/kubevirt-py/mig")


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """The conventions under a target's address (a directory both sides can reach)."""

    address: Path
    session: bool = False  # the daemons run in session mode (non-root launchers)

    @property
    def libvirt_socket(self) -> Path:
        return self.address / podlayout.LIBVIRT_SOCKET

    @property
    def libvirt_uri(self) -> str:
        path = driver_path(session=self.session)
        return f"qemu+unix:///{path}?socket={self.libvirt_socket}"

    @property
    def memory_socket(self) -> Path:
        return self.address / podlayout.MIGRATION_MEMORY_SOCKET

    @property
    def disks_socket(self) -> Path:
        return self.address / podlayout.MIGRATION_DISKS_SOCKET

    @property
    def migration_uri(self) -> str:
        return f"unix://{self.memory_socket}"

    @property
    def disks_uri(self) -> str:
        return f"unix://{self.disks_socket}"

    @property
    def xml_file(self) -> Path:
        return self.address / "mig-domain.xml"


def open_endpoint(
    libvirt_root: Path, *, short_id: str, xml: str, link_root: Path, session: bool = False
) -> Endpoint:
    """Publish this (target) launcher's endpoint: the short link and the domain XML."""
    link_root.mkdir(parents=True, exist_ok=True)
    link = link_root / short_id
    with contextlib.suppress(FileNotFoundError):
        link.unlink()
    link.symlink_to(f"/proc/{os.getpid()}/root{libvirt_root.resolve()}")
    endpoint = Endpoint(address=link, session=session)
    for stale in (endpoint.memory_socket, endpoint.disks_socket):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()
    (libvirt_root / endpoint.xml_file.name).write_text(xml)
    return endpoint


def close_endpoint(endpoint: Endpoint | None) -> None:
    if endpoint is not None:
        with contextlib.suppress(OSError):
            endpoint.address.unlink()
