"""Launcher configuration: the command line, parsed once into a frozen dataclass."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Self

from shared import podlayout


class VirtType(StrEnum):
    """``auto`` uses KVM only where scripts/probe-kvm saw a guest boot with it."""

    AUTO = "auto"
    KVM = "kvm"
    QEMU = "qemu"


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    name: str
    namespace: str
    uid: str
    sockets_dir: Path
    private_dir: Path
    notify_socket: Path | None
    grace_period_seconds: int
    container_disks_dir: Path
    claim_capacities: dict[str, int]
    virt_type: VirtType
    kvm_probe_file: Path | None
    libvirtd: Path
    tini: Path
    log_format: str
    capabilities_seed: Path | None
    node_name: str = ""  # the pod's node (named in failures)

    @property
    def vmi_disks_dir(self) -> Path:
        """Where the pod mounts PVC and hostDisk volumes (podlayout.VMI_DISKS_DIR)."""
        return self.private_dir / podlayout.VMI_DISKS_SUBDIR

    @property
    def vmi_key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def domain_name(self) -> str:
        """KubeVirt names domains ``<namespace>_<name>``."""
        return f"{self.namespace}_{self.name}"

    @classmethod
    def from_args(cls, argv: Sequence[str] | None = None) -> Self:
        ns = _parser().parse_args(argv)
        return cls(
            name=ns.name,
            namespace=ns.namespace,
            uid=ns.uid,
            sockets_dir=ns.sockets_dir,
            private_dir=ns.private_dir,
            notify_socket=ns.notify_socket,
            grace_period_seconds=ns.grace_period_seconds,
            container_disks_dir=ns.container_disks_dir,
            claim_capacities=dict(ns.claim_capacity or []),
            virt_type=VirtType(ns.virt_type),
            kvm_probe_file=ns.kvm_probe_file,
            libvirtd=ns.libvirtd,
            tini=ns.tini,
            log_format=ns.log_format,
            capabilities_seed=ns.capabilities_seed,
            node_name=ns.node_name,
        )


def _claim_capacity(text: str) -> tuple[str, int]:
    volume, sep, size = text.partition("=")
    if not sep or not volume or not size.isdigit():
        raise argparse.ArgumentTypeError(f"expected VOLUME=BYTES, got {text!r}")
    return volume, int(size)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="virt-launcher-py", description="One VM's launcher.")
    p.add_argument("--name", required=True, help="VMI name")
    p.add_argument("--namespace", required=True, help="VMI namespace")
    p.add_argument("--uid", required=True, help="VMI UID")
    p.add_argument("--sockets-dir", type=Path, required=True, help="the pod's sockets emptyDir")
    p.add_argument("--private-dir", type=Path, required=True, help="pod-private state root")
    p.add_argument("--notify-socket", type=Path, help="the handler's domain-notify socket")
    p.add_argument("--grace-period-seconds", type=int, default=30)
    p.add_argument(
        "--container-disks-dir",
        type=Path,
        default=Path(podlayout.CONTAINER_DISKS_DIR),
        help="where the pod's init containers copied containerDisk and kernelBoot files",
    )
    p.add_argument(
        "--claim-capacity",
        type=_claim_capacity,
        action="append",
        metavar="VOLUME=BYTES",
        help="the size of a PVC volume's disk.img when the launcher must make it (repeatable)",
    )
    p.add_argument("--virt-type", choices=[v.value for v in VirtType], default="auto")
    p.add_argument("--kvm-probe-file", type=Path, help="scripts/probe-kvm's cached verdict")
    p.add_argument("--libvirtd", type=Path, default=Path("/usr/sbin/libvirtd"))
    p.add_argument("--tini", type=Path, default=Path("/usr/bin/tini"))
    p.add_argument("--log-format", choices=["json", "console"], default="json")
    # The pod template sets NODE_NAME from spec.nodeName.
    p.add_argument("--node-name", default=os.environ.get("NODE_NAME", ""))
    p.add_argument(
        "--capabilities-seed", type=Path, help="a directory of QEMU capability caches to reuse"
    )
    return p
