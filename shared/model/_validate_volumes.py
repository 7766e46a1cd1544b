"""Validation of spec.volumes (sources, disk pairing, cloud-init) and of interfaces ↔ networks."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import posixpath
import re

from shared.model._validate_common import (
    Errors,
    ValidationLimits,
    check_abs_path,
    check_image,
    check_name,
    check_pull_secret,
    check_quantity,
    check_unique_names,
)
from shared.model._validate_config import (
    check_secret_ref,
    validate_config_volume,
    validate_service_accounts,
)
from shared.model._validate_multus import validate_multus
from shared.model.domain import Interface
from shared.model.enums import HostDiskType
from shared.model.quantity import format_bytes
from shared.model.vmi import VMISpec
from shared.model.volumes import CloudInitNoCloudSource, Volume

# Volume sources KubeVirt knows that kubevirt-py does not run (yet), with why.
UNSUPPORTED_SOURCES: dict[str, str] = {}
# A hostDisk's directory is mounted into the launcher pod: never the node's root or a
# system tree.
HOST_DISK_FORBIDDEN_DIRS = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/root", "/run",
    "/sbin", "/sys", "/usr", "/var/run", "/var/lib/kubelet", "/var/lib/containerd",
    "/var/lib/kubevirt-py", "/var/log",
)  # fmt: skip
INTERFACE_MODELS = frozenset({"virtio", "e1000", "e1000e", "rtl8139", "ne2k_pci", "pcnet"})
_MAC = re.compile(r"[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2}){4}")


def _check_capacity(
    errs: Errors, path: str, value: str | int | None, *, required: bool, limit: int
) -> None:
    size = check_quantity(errs, path, value, required=required)
    if size is not None and size > limit:
        errs.add(path, f"must be at most {format_bytes(limit)}", value)


def _validate_source(errs: Errors, path: str, vol: Volume, limits: ValidationLimits) -> None:
    """Per-source rules for the typed volume sources."""
    if vol.container_disk is not None:
        cd = vol.container_disk
        check_image(errs, f"{path}.containerDisk.image", cd.image)
        check_abs_path(errs, f"{path}.containerDisk.path", cd.path, required=False)
        check_pull_secret(errs, f"{path}.containerDisk.imagePullSecret", cd.image_pull_secret)
    if vol.persistent_volume_claim is not None:
        claim = vol.persistent_volume_claim.claim_name
        check_name(errs, f"{path}.persistentVolumeClaim.claimName", claim, subdomain=True)
    if vol.data_volume is not None:
        check_name(errs, f"{path}.dataVolume.name", vol.data_volume.name, subdomain=True)
    if vol.ephemeral is not None:
        _check_ephemeral(errs, f"{path}.ephemeral", vol)
    if vol.host_disk is not None:
        hd = vol.host_disk
        check_abs_path(errs, f"{path}.hostDisk.path", hd.path)
        _check_host_disk_dir(errs, f"{path}.hostDisk.path", hd.path)
        if hd.type is None:
            errs.add(f"{path}.hostDisk.type", "is required (Disk or DiskOrCreate)")
        required = hd.type == HostDiskType.DISK_OR_CREATE
        _check_capacity(
            errs,
            f"{path}.hostDisk.capacity",
            hd.capacity,
            required=required,
            limit=limits.max_disk_bytes,
        )
    if vol.empty_disk is not None:
        _check_capacity(
            errs,
            f"{path}.emptyDisk.capacity",
            vol.empty_disk.capacity,
            required=True,
            limit=limits.max_disk_bytes,
        )


def _check_ephemeral(errs: Errors, path: str, vol: Volume) -> None:
    """An ephemeral volume names its claim; the claim is only ever read (the overlay
    takes the writes), so it cannot be hotplugged."""
    pvc = vol.ephemeral.persistent_volume_claim if vol.ephemeral is not None else None
    if pvc is None:
        errs.add(f"{path}.persistentVolumeClaim", "is required")
        return
    claim = pvc.claim_name
    check_name(errs, f"{path}.persistentVolumeClaim.claimName", claim, subdomain=True)
    if pvc.hotpluggable:
        errs.add(
            f"{path}.persistentVolumeClaim.hotpluggable",
            "an ephemeral volume cannot be hotplugged",
            pvc.hotpluggable,
        )


def _check_host_disk_dir(errs: Errors, path: str, value: str | None) -> None:
    """The directory of a hostDisk path is mounted into the pod: a directory of its own,
    not the root, not in a system tree."""
    if not value or not value.startswith("/") or posixpath.normpath(value) != value:
        return  # check_abs_path reported it
    directory = posixpath.dirname(value)
    if directory == "/":
        errs.add(path, "must be in a directory below / (the directory is mounted into the pod)")
        return
    for forbidden in HOST_DISK_FORBIDDEN_DIRS:
        if directory == forbidden or directory.startswith(forbidden + "/"):
            errs.add(path, f"must not be under {forbidden} (the directory is mounted into the pod)")
            return


def _check_payload(
    errs: Errors, path: str, plain: str | None, encoded: str | None, limit: int
) -> None:
    """One cloud-init document (plain or base64): decodable and within the size limit."""
    size: int | None = None
    if plain is not None:
        size = len(plain.encode())
    elif encoded is not None:
        try:
            size = len(base64.b64decode(encoded, validate=True))
        except (binascii.Error, ValueError):
            errs.add(f"{path}Base64", "is not valid base64")
    if size is not None and size > limit:
        where = path if plain is not None else f"{path}Base64"
        errs.add(where, f"is {size} bytes, more than the limit of {limit}", size)


def _validate_cloud_init(
    errs: Errors, path: str, ci: CloudInitNoCloudSource, limits: ValidationLimits
) -> None:
    """Exactly one user-data form, at most one network-data form, each decodable and bounded
    (NoCloud and ConfigDrive alike)."""
    user_forms = [
        k
        for k, v in (
            ("userData", ci.user_data),
            ("userDataBase64", ci.user_data_base64),
            ("secretRef", ci.user_data_secret_ref),
        )
        if v is not None
    ]
    net_forms = [
        k
        for k, v in (
            ("networkData", ci.network_data),
            ("networkDataBase64", ci.network_data_base64),
            ("networkDataSecretRef", ci.network_data_secret_ref),
        )
        if v is not None
    ]
    if len(user_forms) != 1:
        found = f" (found {', '.join(user_forms)})" if user_forms else ""
        errs.add(path, f"must set exactly one of userData, userDataBase64, secretRef{found}")
    if len(net_forms) > 1:
        errs.add(path, f"must set at most one of {', '.join(net_forms)}")
    limit = limits.max_userdata_bytes
    _check_payload(errs, f"{path}.userData", ci.user_data, ci.user_data_base64, limit)
    _check_payload(errs, f"{path}.networkData", ci.network_data, ci.network_data_base64, limit)
    check_secret_ref(errs, f"{path}.secretRef", ci.user_data_secret_ref)
    check_secret_ref(errs, f"{path}.networkDataSecretRef", ci.network_data_secret_ref)


def validate_volumes(errs: Errors, path: str, spec: VMISpec, limits: ValidationLimits) -> None:
    """Names unique labels, exactly one source each, used by exactly one disk."""
    vols_path = f"{path}.volumes"
    disk_names = [d.name for d in spec.domain.devices.disks]
    # virtiofs' volumes and ACPI tables have no disk (their own checks)
    shared_names = {f.name for f in spec.domain.devices.filesystems}
    shared_names |= spec.domain.firmware.acpi_volumes()
    for i, vol in enumerate(spec.volumes):
        vpath = f"{vols_path}[{i}]"
        check_name(errs, f"{vpath}.name", vol.name)
        sources = vol.sources()
        if not sources:
            errs.add(vpath, "must set a volume source")
        elif len(sources) > 1:
            errs.add(vpath, f"must set exactly one volume source (found {', '.join(sources)})")
        _validate_source(errs, vpath, vol, limits)
        validate_config_volume(errs, vpath, vol)
        if vol.is_hotplug and spec.domain.devices.disable_hotplug:
            where = "persistentVolumeClaim" if vol.persistent_volume_claim else "dataVolume"
            errs.add(
                f"{vpath}.{where}.hotpluggable",
                f"hotplug is disabled by {path}.domain.devices.disableHotplug",
                True,
            )
        for source in sources:
            if source in UNSUPPORTED_SOURCES:
                errs.add(f"{vpath}.{source}", UNSUPPORTED_SOURCES[source])
        if vol.cloud_init_no_cloud is not None:
            _validate_cloud_init(errs, f"{vpath}.cloudInitNoCloud", vol.cloud_init_no_cloud, limits)
        if vol.cloud_init_config_drive is not None:
            drive = vol.cloud_init_config_drive
            _validate_cloud_init(errs, f"{vpath}.cloudInitConfigDrive", drive, limits)
        users = disk_names.count(vol.name) if vol.name else 0
        _check_users(errs, vpath, vol, users=users, diskless=vol.name in shared_names)
    check_unique_names(errs, vols_path, [v.name for v in spec.volumes])
    validate_service_accounts(errs, vols_path, spec.volumes)
    dumps = [i for i, v in enumerate(spec.volumes) if v.memory_dump is not None]
    for i in dumps[1:]:  # one memory dump volume at a time (KubeVirt's rule)
        errs.add(f"{vols_path}[{i}].memoryDump", "must have max one memory dump volume set")
    metrics = [i for i, v in enumerate(spec.volumes) if v.downward_metrics is not None]
    for i in metrics[1:]:  # one vhostmd disk per VMI (KubeVirt's rule)
        errs.add(
            f"{vols_path}[{i}].downwardMetrics",
            f"only one downwardMetrics volume is allowed (also {vols_path}[{metrics[0]}])",
        )


def _check_users(errs: Errors, path: str, vol: Volume, *, users: int, diskless: bool) -> None:
    """Every volume is one disk's (a memory dump volume none's; a virtiofs share's or an
    ACPI table's, `diskless`, none's either)."""
    if vol.memory_dump is not None:
        _check_memory_dump(errs, path, vol, users=users)
    elif vol.name and users == 0 and not diskless:
        kind = "cloud-init volume" if vol.is_cloud_init else "volume"
        message = f"{kind} {vol.name!r} is not used by any disk or filesystem"
        errs.add(f"{path}.name", message, vol.name)
    elif users > 1:
        errs.add(f"{path}.name", f"volume {vol.name!r} is used by {users} disks", vol.name)


def _check_memory_dump(errs: Errors, path: str, vol: Volume, *, users: int) -> None:
    """A memory dump volume: the claim it names is the volume's name, hot-plugged into
    the launcher for writing, and no disk of the guest's."""
    dump = vol.memory_dump
    if dump is None:
        return
    check_name(errs, f"{path}.memoryDump.claimName", dump.claim_name, subdomain=True)
    if dump.claim_name and vol.name != dump.claim_name:
        errs.add(f"{path}.name", "a memoryDump volume is named after its claim", vol.name)
    if not dump.hotpluggable:
        errs.add(f"{path}.memoryDump.hotpluggable", "must be true (it is hot-plugged)", False)
    if dump.read_only:
        errs.add(f"{path}.memoryDump.readOnly", "a memory dump is written: not read-only", True)
    if users:
        errs.add(f"{path}.name", f"memoryDump volume {vol.name!r} is no disk's volume", vol.name)


def _validate_interface_fields(errs: Errors, path: str, spec: VMISpec, i: int) -> None:
    iface = spec.domain.devices.interfaces[i]
    check_name(errs, f"{path}.name", iface.name)
    bindings = iface.bindings()
    if iface.binding is not None and len(bindings) > 1:
        others = ", ".join(b for b in bindings if b != "binding")
        errs.add(f"{path}.binding", f"cannot have both a binding plugin and {others}")
    elif len(bindings) != 1:
        found = f" (found {', '.join(bindings)})" if bindings else ""
        errs.add(path, f"must set exactly one binding method, e.g. masquerade or bridge{found}")
    if iface.binding is not None and not iface.binding.name:
        errs.add(f"{path}.binding.name", "is required (a plugin the KubeVirt CR registers)")
    if iface.model is not None and iface.model not in INTERFACE_MODELS:
        errs.add(
            f"{path}.model", f"must be one of {', '.join(sorted(INTERFACE_MODELS))}", iface.model
        )
    if iface.mac_address is not None and not _MAC.fullmatch(iface.mac_address):
        errs.add(f"{path}.macAddress", "is not a valid MAC address", iface.mac_address)
    network = spec.network(iface.name) if iface.name else None
    if iface.name and network is None:
        errs.add(f"{path}.name", f"no network named {iface.name!r} in spec.networks", iface.name)
    if iface.masquerade is not None and network is not None and not network.primary:
        errs.add(
            f"{path}.masquerade",
            "masquerade is only allowed on the pod network or a multus default network",
        )
    if iface.uses_passt() and network is not None and not network.primary:
        key = "passtBinding" if iface.passt_binding is not None else "binding.name"
        errs.add(
            f"{path}.{key}",
            "passt is only allowed on the pod network or a multus default network",
        )
    _validate_ports(errs, path, iface)


def _validate_ports(errs: Errors, path: str, iface: Interface) -> None:
    if iface.ports and iface.masquerade is None and not iface.uses_passt():
        errs.add(f"{path}.ports", "ports are only forwarded by a masquerade or passt interface")
    for j, port in enumerate(iface.ports):
        if not 1 <= port.port <= 65535:
            errs.add(f"{path}.ports[{j}].port", "must be a port number 1-65535", str(port.port))
        if port.protocol is not None and port.protocol not in ("TCP", "UDP"):
            errs.add(f"{path}.ports[{j}].protocol", "must be TCP or UDP", port.protocol)


def validate_networks(errs: Errors, path: str, spec: VMISpec) -> None:
    """Interfaces and networks pair by name; one binding, one source, one pod network."""
    ifaces_path = f"{path}.domain.devices.interfaces"
    for i in range(len(spec.domain.devices.interfaces)):
        _validate_interface_fields(errs, f"{ifaces_path}[{i}]", spec, i)
    check_unique_names(errs, ifaces_path, [x.name for x in spec.domain.devices.interfaces])
    nets_path = f"{path}.networks"
    pod_at: int | None = None
    for i, net in enumerate(spec.networks):
        npath = f"{nets_path}[{i}]"
        check_name(errs, f"{npath}.name", net.name)
        sources = net.sources()
        if len(sources) != 1:
            found = f" (found {', '.join(sources)})" if sources else ""
            errs.add(npath, f"must set exactly one network source, e.g. pod{found}")
        if net.name and spec.domain.devices.interface(net.name) is None:
            errs.add(f"{npath}.name", f"network {net.name!r} has no interface", net.name)
        validate_multus(errs, npath, net)
        if not net.primary:
            continue
        if pod_at is not None:
            field = "pod" if net.pod is not None else "multus.default"
            errs.add(
                f"{npath}.{field}",
                f"the pod's primary network is already {nets_path}[{pod_at}]",
            )
        pod_at = i if pod_at is None else pod_at
        if net.pod is None:
            continue
        cidr = net.pod.vm_network_cidr
        if cidr is not None and not _is_ipv4_cidr(cidr):
            errs.add(f"{npath}.pod.vmNetworkCIDR", "is not a valid IPv4 CIDR", cidr)
        elif cidr is not None and ipaddress.IPv4Network(cidr, strict=False).prefixlen > 30:
            errs.add(
                f"{npath}.pod.vmNetworkCIDR",
                "leaves no room for the gateway and the guest (a prefix of at most /30)",
                cidr,
            )
        _check_ipv6_cidr(errs, f"{npath}.pod.vmIPv6NetworkCIDR", net.pod.vm_ipv6_network_cidr)
    check_unique_names(errs, nets_path, [n.name for n in spec.networks])


def _check_ipv6_cidr(errs: Errors, path: str, cidr: str | None) -> None:
    """vmIPv6NetworkCIDR: an IPv6 CIDR leaving room for the gateway and the guest."""
    if cidr is None:
        return
    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        net = None
    if net is None or net.version != 6 or "/" not in cidr:
        errs.add(path, "is not a valid IPv6 CIDR", cidr)
    elif net.prefixlen > 126:
        errs.add(
            path, "leaves no room for the gateway and the guest (a prefix of at most /126)", cidr
        )


def _is_ipv4_cidr(value: str) -> bool:
    try:
        net = ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return net.version == 4 and "/" in value
