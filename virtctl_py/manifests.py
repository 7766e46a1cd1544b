"""Manifests the CLI emits: ``create vm`` from flags and ``expose`` Services."""

from __future__ import annotations

from dataclasses import dataclass
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
    domain = _domain(flags, disks)
    metadata: dict[str, Any] = {"name": flags.name}
    if flags.namespace:
        metadata["namespace"] = flags.namespace
    spec: dict[str, Any] = {"runStrategy": str(flags.run_strategy)}
    if flags.instancetype:
        spec["instancetype"] = _matcher(flags.instancetype, INSTANCETYPE_KIND)
    if flags.preference:
        spec["preference"] = _matcher(flags.preference, PREFERENCE_KIND)
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


def _domain(flags: VMFlags, disks: list[dict[str, Any]]) -> dict[str, Any]:
    """spec.template.spec.domain: the disks, one masquerade interface, and memory, CPUs and
    kernel boot as flagged (memory and CPUs left to an instancetype when one is named)."""
    domain: dict[str, Any] = {
        "devices": {"disks": disks, "interfaces": [{"name": "default", "masquerade": {}}]}
    }
    memory = flags.memory or (None if flags.instancetype else DEFAULT_MEMORY)
    if memory:
        domain["memory"] = {"guest": memory}
        domain["resources"] = {"requests": {"memory": memory}}
    cpus = flags.cpus or (None if flags.instancetype else 1)
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
