"""`create instancetype | preference | clone`: manifests as KubeVirt v1.8's virtctl writes
them (its flags, its defaults: a cluster-wide kind unless `--namespaced` or `-n`, a random
name unless `--name`). Parsing loads nothing heavy; rendering only needs these dicts.
"""

from __future__ import annotations

import argparse
import random
import re
from collections.abc import Callable
from typing import Any

from virtctl_py.errors import CliError, Exit

INSTANCETYPE_API = "instancetype.kubevirt.io/v1beta1"
CLONE_API = "clone.kubevirt.io/v1beta1"
IOTHREADS_POLICIES = ("auto", "shared")
# KubeVirt's preferredCPUTopology values (the prefer* spellings are deprecated).
CPU_TOPOLOGIES = (
    "preferSockets", "preferCores", "preferThreads", "preferSpread", "preferAny",
    "sockets", "cores", "threads", "spread", "any",
)  # fmt: skip
CLONE_SOURCES = {
    **dict.fromkeys(
        ("vm", "VM", "VirtualMachine", "virtualmachine"), ("kubevirt.io", "VirtualMachine")
    ),
    **dict.fromkeys(
        ("snapshot", "VirtualMachineSnapshot", "vmsnapshot", "VMSnapshot"),
        ("snapshot.kubevirt.io", "VirtualMachineSnapshot"),
    ),
}
_QUANTITY = re.compile(r"[+]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[mkMGTPE])?")


def _usage(message: str) -> CliError:
    return CliError(message, code=Exit.USAGE)


def _flag_error(flag: str, message: str) -> CliError:
    return _usage(f'failed to parse "--{flag}" flag: {message}')


def random_suffix(length: int = 5) -> str:
    """Kubernetes' rand.String alphabet (no vowels, no ambiguous characters)."""
    return "".join(random.choices("bcdfghjklmnpqrstvwxz2456789", k=length))


def add_parsers(kinds: Any, common: argparse.ArgumentParser) -> None:
    """`create instancetype`, `create preference` and `create clone` under `kinds`."""
    p = kinds.add_parser("instancetype", help="a (Cluster)Instancetype manifest", parents=[common])
    p.add_argument("--name", help="its name (default: a random one)")
    p.add_argument("--cpu", type=int, required=True, help="vCPUs")
    p.add_argument("--memory", required=True, help="guest memory")
    p.add_argument("--gpu", action="append", default=[], metavar="name:N,devicename:D")
    p.add_argument("--hostdevice", action="append", default=[], metavar="name:N,devicename:D")
    p.add_argument("--iothreadspolicy", help="auto or shared")
    p.add_argument("--namespaced", action="store_true", help="a VirtualMachineInstancetype")
    p = kinds.add_parser("preference", help="a (Cluster)Preference manifest", parents=[common])
    p.add_argument("--name", help="its name (default: a random one)")
    p.add_argument("--namespaced", action="store_true", help="a VirtualMachinePreference")
    p.add_argument("--volume-storage-class", help="the preferred storage class")
    p.add_argument("--machine-type", help="the preferred machine type")
    p.add_argument("--cpu-topology", help="the preferred guest CPU topology")
    p = kinds.add_parser("clone", help="a VirtualMachineClone manifest", parents=[common])
    p.add_argument("--name", help="its name (default: a random one)")
    p.add_argument("--source-name", required=True)
    p.add_argument("--target-name", default="")
    p.add_argument("--source-type", default="vm", help="vm or snapshot")
    p.add_argument("--target-type", default="vm", help="vm")
    for flag in ("label-filter", "annotation-filter", "template-label-filter",
                 "template-annotation-filter", "new-mac-address"):  # fmt: skip
        p.add_argument(f"--{flag}", action="append", default=[])
    p.add_argument("--new-smbios-serial", default="")


def _params(flag: str, text: str, keys: tuple[str, ...]) -> dict[str, str]:
    """KubeVirt's `key:value,key:value` flag parameters."""
    out: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition(":")
        if not sep or key.lower() not in keys:
            raise _flag_error(flag, f"unknown param(s): {part}")
        out[key.lower()] = value
    return out


def _devices(flag: str, values: list[str]) -> list[dict[str, str]]:
    devices = []
    for text in values:
        params = _params(flag, text, ("name", "devicename"))
        if not params.get("name"):
            raise _flag_error(flag, "name must be specified")
        if not params.get("devicename"):
            raise _flag_error(flag, "deviceName must be specified")
        devices.append({"name": params["name"], "deviceName": params["devicename"]})
    return devices


def _metadata(
    args: argparse.Namespace, namespace: str | None, prefix: str
) -> tuple[dict[str, Any], bool]:
    """The object's metadata, and whether it is namespaced (`-n` makes it so)."""
    namespaced = bool(args.namespaced or namespace)
    name = args.name or f"{prefix if namespaced else 'cluster' + prefix}-{random_suffix()}"
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return meta, namespaced


def instancetype(args: argparse.Namespace, namespace: str | None) -> dict[str, Any]:
    """`create instancetype`: a VirtualMachine(Cluster)Instancetype."""
    if not _QUANTITY.fullmatch(args.memory):
        raise _usage(f"quantities must match the regular expression '{_QUANTITY.pattern}'")
    if args.cpu <= 0:
        raise _usage("cpu value must be greater than zero")
    spec: dict[str, Any] = {"cpu": {"guest": args.cpu}, "memory": {"guest": args.memory}}
    if args.gpu:
        spec["gpus"] = _devices("gpu", args.gpu)
    if args.hostdevice:
        spec["hostDevices"] = _devices("hostdevice", args.hostdevice)
    if args.iothreadspolicy is not None:
        if args.iothreadspolicy not in IOTHREADS_POLICIES:
            raise _flag_error("iothreadspolicy", "IOThread must be of value auto or shared")
        spec["ioThreadsPolicy"] = args.iothreadspolicy
    meta, namespaced = _metadata(args, namespace, "instancetype")
    kind = "VirtualMachineInstancetype" if namespaced else "VirtualMachineClusterInstancetype"
    return {"apiVersion": INSTANCETYPE_API, "kind": kind, "metadata": meta, "spec": spec}


def preference(args: argparse.Namespace, namespace: str | None) -> dict[str, Any]:
    """`create preference`: a VirtualMachine(Cluster)Preference."""
    spec: dict[str, Any] = {}
    if args.cpu_topology is not None:
        if args.cpu_topology not in CPU_TOPOLOGIES:
            message = "CPU topology must have a value of sockets, cores, threads or spread"
            raise _flag_error("cpu-topology", message)
        spec["cpu"] = {"preferredCPUTopology": args.cpu_topology}
    if args.machine_type is not None:
        spec["machine"] = {"preferredMachineType": args.machine_type}
    if args.volume_storage_class is not None:
        spec["volumes"] = {"preferredStorageClassName": args.volume_storage_class}
    meta, namespaced = _metadata(args, namespace, "preference")
    kind = "VirtualMachinePreference" if namespaced else "VirtualMachineClusterPreference"
    return {"apiVersion": INSTANCETYPE_API, "kind": kind, "metadata": meta, "spec": spec}


def _reference(kind_flag: str, name: str, *, source: bool) -> dict[str, Any]:
    group_kind = CLONE_SOURCES.get(kind_flag)
    if group_kind is None or (not source and group_kind[1] != "VirtualMachine"):
        which, supported = ("source", "vm, vmsnapshot") if source else ("target", "vm")
        raise _usage(f"{which} type {kind_flag} is not supported. Supported types: {supported}")
    ref: dict[str, Any] = {"apiGroup": group_kind[0], "kind": group_kind[1]}
    if name:
        ref["name"] = name
    return ref


def _mac_addresses(values: list[str]) -> dict[str, str]:
    out = {}
    for text in values:
        parts = text.split(":")
        if len(parts) != 2:
            raise _usage(
                f"newMacAddress parameter {text} is invalid: exactly one ':' is expected. "
                "For example: 'interface0:address0'"
            )
        if not parts[0]:
            raise _usage(f"newMacAddress parameter {text} has empty interface name")
        if not parts[1]:
            raise _usage(f"newMacAddress parameter {text} has empty address name")
        out[parts[0]] = parts[1]
    return out


def clone(args: argparse.Namespace, namespace: str | None) -> dict[str, Any]:
    """`create clone`: a VirtualMachineClone of a VM or a snapshot into a VM."""
    if not args.source_name:
        raise _usage("source name must not be empty")
    spec: dict[str, Any] = {
        "source": _reference(args.source_type, args.source_name, source=True),
        "target": _reference(args.target_type, args.target_name, source=False),
    }
    if args.label_filter:
        spec["labelFilters"] = list(args.label_filter)
    if args.annotation_filter:
        spec["annotationFilters"] = list(args.annotation_filter)
    template = {
        "labelFilters": list(args.template_label_filter),
        "annotationFilters": list(args.template_annotation_filter),
    }
    if any(template.values()):
        spec["template"] = {k: v for k, v in template.items() if v}
    if args.new_mac_address:
        spec["newMacAddresses"] = _mac_addresses(args.new_mac_address)
    if args.new_smbios_serial:
        spec["newSMBiosSerial"] = args.new_smbios_serial
    meta: dict[str, Any] = {"name": args.name or f"clone-{random_suffix()}"}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": CLONE_API, "kind": "VirtualMachineClone", "metadata": meta, "spec": spec}


RENDERERS: dict[str, Callable[[argparse.Namespace, str | None], dict[str, Any]]] = {
    "instancetype": instancetype,
    "preference": preference,
    "clone": clone,
}
