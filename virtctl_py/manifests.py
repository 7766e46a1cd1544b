"""Manifests the CLI emits: ``create vm`` from flags (an instancetype and preference named
or inferred from a volume, as upstream's) and ``expose`` Services."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from shared.labels import VM_LABEL
from shared.model import RunStrategy
from virtctl_py.errors import CliError, Exit

DEFAULT_MEMORY = "128Mi"
INSTANCETYPE_KIND = "virtualmachineclusterinstancetype"
PREFERENCE_KIND = "virtualmachineclusterpreference"
VOLUME_KEYS = frozenset({"src", "name", "bootorder"})


@dataclass(frozen=True, slots=True, kw_only=True)
class VolumeFlag:
    """One --volume-containerdisk / --volume-pvc: `src:X[,name:N][,bootorder:B]`."""

    src: str
    name: str | None = None
    boot_order: int | None = None

    @classmethod
    def parse(cls, text: str, *, flag: str) -> VolumeFlag:
        """Upstream's `key:value,...` (the value may hold colons: an image's tag); a bare
        value is the source."""
        params: dict[str, str] = {}
        for i, part in enumerate(text.split(",")):
            key, sep, value = part.partition(":")
            if sep and key in VOLUME_KEYS:
                params[key] = value
            elif i == 0:
                params["src"] = part  # a bare reference (an image's tag holds a colon)
            else:
                raise CliError(f"{flag}: unknown parameter {part!r}", code=Exit.USAGE)
        if not params.get("src"):
            raise CliError(f"{flag}: src: is required", code=Exit.USAGE)
        try:
            order = int(params["bootorder"]) if "bootorder" in params else None
        except ValueError as e:
            raise CliError(f"{flag}: bootorder must be a number", code=Exit.USAGE) from e
        return cls(src=params["src"], name=params.get("name"), boot_order=order)


@dataclass(frozen=True, slots=True, kw_only=True)
class Inference:
    """--infer-instancetype / --infer-preference [true|false] and --infer-…-from VOLUME:
    on by default from the first boot disk, its failures then ignored (upstream's)."""

    enabled: bool = True
    volume: str | None = None
    explicit: bool = False

    @classmethod
    def of(cls, flag: str | None, volume: str | None) -> Inference:
        """From --infer-X (None: not given) and --infer-X-from."""
        return cls(
            enabled=flag != "false",
            volume=volume,
            explicit=flag is not None or volume is not None,
        )


def exclusive(given: Mapping[str, bool]) -> None:
    """Upstream's mutually exclusive flag groups: at most one of `given` set."""
    chosen = sorted(name for name, is_set in given.items() if is_set)
    if len(chosen) > 1:
        raise CliError(
            f"if any flags in the group [{' '.join(given)}] are set none of the others can be; "
            f"[{' '.join(chosen)}] were all set",
            code=Exit.USAGE,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class VMFlags:
    name: str
    namespace: str | None
    memory: str | None
    cpus: int | None
    run_strategy: RunStrategy
    container_disks: tuple[VolumeFlag, ...] = ()
    pvcs: tuple[VolumeFlag, ...] = ()
    instancetype: str | None = None
    preference: str | None = None
    infer_instancetype: Inference = field(default_factory=Inference)
    infer_preference: Inference = field(default_factory=Inference)
    kernel_image: str | None = None
    kernel_args: str = "console=ttyS0"
    user_data: str | None = None
    grace: int = 180


def _matcher(text: str, default_kind: str) -> dict[str, str]:
    kind, sep, name = text.partition("/")
    return {"kind": kind, "name": name} if sep else {"kind": default_kind, "name": text}


def _volumes(flags: VMFlags) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    disks: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    sources = [
        ("containerdisk", v, {"containerDisk": {"image": v.src}}) for v in flags.container_disks
    ]
    sources += [("pvc", v, {"persistentVolumeClaim": {"claimName": v.src}}) for v in flags.pvcs]
    for i, (prefix, vol, source) in enumerate(sources):
        name = vol.name or (f"{flags.name}-{prefix}-{i}")
        disk: dict[str, Any] = {"name": name, "disk": {"bus": "virtio"}}
        if vol.boot_order is not None:
            disk["bootOrder"] = vol.boot_order
        disks.append(disk)
        volumes.append({"name": name, **source})
    if flags.user_data is not None:
        disks.append({"name": "cloudinitdisk", "cdrom": {"bus": "sata"}})
        volumes.append({"name": "cloudinitdisk", "cloudInitNoCloud": {"userData": flags.user_data}})
    return disks, volumes


def vm_manifest(flags: VMFlags) -> dict[str, Any]:
    """A VirtualMachine as `virtctl create vm` would write it."""
    disks, volumes = _volumes(flags)
    if not (flags.container_disks or flags.pvcs or flags.kernel_image):
        raise CliError(
            "create vm needs --volume-containerdisk, --volume-pvc or --kernel-image",
            code=Exit.USAGE,
        )
    spec: dict[str, Any] = {"runStrategy": str(flags.run_strategy)}
    if flags.instancetype:
        spec["instancetype"] = _matcher(flags.instancetype, INSTANCETYPE_KIND)
    elif not flags.memory and flags.infer_instancetype.enabled:
        _infer(spec, "instancetype", flags.infer_instancetype, volumes, disks)
    if flags.preference:
        spec["preference"] = _matcher(flags.preference, PREFERENCE_KIND)
    elif flags.infer_preference.enabled:
        _infer(spec, "preference", flags.infer_preference, volumes, disks)
    domain = _domain(flags, disks, sizing=_sizing(spec.get("instancetype")))
    metadata: dict[str, Any] = {"name": flags.name}
    if flags.namespace:
        metadata["namespace"] = flags.namespace
    spec["template"] = {
        "metadata": {"labels": {VM_LABEL: flags.name}},
        "spec": {
            "terminationGracePeriodSeconds": flags.grace,
            "domain": domain,
            "networks": [{"name": "default", "pod": {}}],
            "volumes": volumes,
        },
    }
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": metadata,
        "spec": spec,
    }


def _boot_volume(volumes: list[dict[str, Any]], disks: list[dict[str, Any]]) -> str:
    """The disk with the lowest boot order, else the first volume (upstream's choice)."""
    if not volumes:
        raise CliError(
            "at least one volume is needed to infer an instance type or preference",
            code=Exit.USAGE,
        )
    ordered = [d for d in disks if isinstance(d.get("bootOrder"), int)]
    if ordered:
        return str(min(ordered, key=lambda d: d["bootOrder"])["name"])
    return str(volumes[0]["name"])


def _inferable(name: str, volumes: list[dict[str, Any]]) -> str:
    volume = next((v for v in volumes if v.get("name") == name), None)
    if volume is None:
        raise CliError(f'there is no volume with name "{name}"', code=Exit.USAGE)
    if "persistentVolumeClaim" not in volume and "dataVolume" not in volume:
        raise CliError(
            "inference of instancetype or preference works only with datasources, "
            "datavolumes or pvcs",
            code=Exit.USAGE,
        )
    return name


def _infer(
    spec: dict[str, Any],
    key: str,
    inference: Inference,
    volumes: list[dict[str, Any]],
    disks: list[dict[str, Any]],
) -> None:
    """spec[key] inferred from a volume; without --infer-* a volume that cannot be
    inferred from is skipped, and the VM's admission ignores a failure (policy Ignore)."""
    try:
        volume = _inferable(inference.volume or _boot_volume(volumes, disks), volumes)
    except CliError:
        if inference.explicit:
            raise
        return
    matcher: dict[str, Any] = {"inferFromVolume": volume}
    if not inference.explicit:
        matcher["inferFromVolumeFailurePolicy"] = "Ignore"
    spec[key] = matcher


class _Sizing(StrEnum):
    """Who sizes the VM: the flags, an instancetype, or an inferred one (whose failure
    to infer leaves the template's memory: admission drops it when inference works)."""

    FLAGS = "flags"
    INSTANCETYPE = "instancetype"
    INFERRED = "inferred"


def _sizing(matcher: Mapping[str, Any] | None) -> _Sizing:
    if matcher is None:
        return _Sizing.FLAGS
    if matcher.get("inferFromVolumeFailurePolicy") == "Ignore":
        return _Sizing.INFERRED
    return _Sizing.INSTANCETYPE


def _domain(flags: VMFlags, disks: list[dict[str, Any]], *, sizing: _Sizing) -> dict[str, Any]:
    """spec.template.spec.domain: the disks, one masquerade interface, and memory, CPUs and
    kernel boot as flagged (memory and CPUs left to an instancetype when one is named;
    only the guest memory when one may be inferred)."""
    domain: dict[str, Any] = {
        "devices": {"disks": disks, "interfaces": [{"name": "default", "masquerade": {}}]}
    }
    memory = flags.memory or (DEFAULT_MEMORY if sizing != _Sizing.INSTANCETYPE else None)
    if memory:
        domain["memory"] = {"guest": memory}
        if sizing == _Sizing.FLAGS:
            domain["resources"] = {"requests": {"memory": memory}}
    cpus = flags.cpus or (1 if sizing == _Sizing.FLAGS else None)
    if cpus:
        domain["cpu"] = {"cores": cpus}
    if flags.kernel_image:
        domain["firmware"] = {
            "kernelBoot": {
                "kernelArgs": flags.kernel_args,
                "container": {
                    "image": flags.kernel_image,
                    "kernelPath": "/boot/vmlinuz",
                    "initrdPath": "/boot/initrd.img",
                },
            }
        }
    return domain


def service_manifest(
    *,
    name: str,
    namespace: str,
    selector: dict[str, str],
    port: int,
    target_port: int,
    service_type: str,
) -> dict[str, Any]:
    """A Service selecting the VM's launcher pod (which carries the VMI's labels)."""
    if not selector:
        raise CliError(
            f"{namespace}/{name} has no labels to select its pod: add labels to the VMI "
            "(or the VM's spec.template.metadata) and try again",
            code=Exit.USAGE,
        )
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "type": service_type,
            "selector": selector,
            "ports": [{"port": port, "targetPort": target_port, "protocol": "TCP"}],
        },
    }
