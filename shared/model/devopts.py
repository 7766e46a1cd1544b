"""Disk and interface options of kubevirt.io/v1 (typed here so domain.py stays small):
blockSize, ioThreads, dhcpOptions, and the value sets admission checks them against.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from shared.model._codec import Model


class DiskCache(StrEnum):
    """disks[].cache."""

    NONE = "none"
    WRITETHROUGH = "writethrough"
    WRITEBACK = "writeback"


class DiskIO(StrEnum):
    """disks[].io."""

    NATIVE = "native"
    THREADS = "threads"
    DEFAULT = "default"


class DiskErrorPolicy(StrEnum):
    """disks[].errorPolicy."""

    STOP = "stop"
    IGNORE = "ignore"
    REPORT = "report"
    ENOSPACE = "enospace"


class IOThreadsPolicy(StrEnum):
    """domain.ioThreadsPolicy."""

    SHARED = "shared"
    AUTO = "auto"
    SUPPLEMENTAL_POOL = "supplementalPool"


class LinkState(StrEnum):
    """interfaces[].state (KubeVirt 1.5+: up and down; absent is a hot-unplug)."""

    UP = "up"
    DOWN = "down"
    ABSENT = "absent"  # a hot-unplug (shared/model/_validate_nichotplug.py)


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomBlockSize(Model):
    """blockSize.custom: the sizes the guest sees, in bytes (discardGranularity through
    QEMU's device property: launcher/qemuns.py, libvirt 9.0 has no attribute for it)."""

    logical: int | None = None
    physical: int | None = None
    discard_granularity: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchVolume(Model):
    """blockSize.matchVolume: take the sizes of the volume's file or device."""

    enabled: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockSize(Model):
    """disks[].blockSize: custom sizes or matchVolume (one of them)."""

    custom: CustomBlockSize | None = None
    match_volume: MatchVolume | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IOThreads(Model):
    """domain.ioThreads: the supplementalPool's size."""

    supplemental_pool_thread_count: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DHCPPrivateOption(Model):
    """dhcpOptions.privateOptions[]: a site-specific option (224-254) and its text."""

    option: int | None = None
    value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DHCPOptions(Model):
    """interfaces[].dhcpOptions: extra options the guest's DHCP server answers with."""

    boot_file_name: str | None = None
    tftp_server_name: str | None = None
    ntp_servers: tuple[str, ...] = ()
    private_options: tuple[DHCPPrivateOption, ...] = ()
