"""Manifests the CLI emits: ``create vm`` from flags and ``expose`` Services."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.model import RunStrategy
from virtctl_py.errors import CliError, Exit


@dataclass(frozen=True, slots=True, kw_only=True)
class VMFlags:
    name: str
    namespace: str | None
    memory: str
    cpus: int
    run_strategy: RunStrategy
    container_disk: str | None
    kernel_image: str | None
    kernel_args: str
    user_data: str | None
    grace: int


def vm_manifest(flags: VMFlags) -> dict[str, Any]:
    """A VirtualMachine as `virtctl create vm` would write it."""
    disks: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    domain: dict[str, Any] = {
        "cpu": {"cores": flags.cpus},
        "memory": {"guest": flags.memory},
        "resources": {"requests": {"memory": flags.memory}},
        "devices": {"disks": disks, "interfaces": [{"name": "default", "masquerade": {}}]},
    }
    if flags.container_disk:
        disks.append({"name": "containerdisk", "disk": {"bus": "virtio"}})
        volumes.append({"name": "containerdisk", "containerDisk": {"image": flags.container_disk}})
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
    if flags.user_data is not None:
        disks.append({"name": "cloudinitdisk", "cdrom": {"bus": "sata"}})
        volumes.append({"name": "cloudinitdisk", "cloudInitNoCloud": {"userData": flags.user_data}})
    if not volumes and not flags.kernel_image:
        raise CliError("create vm needs --container-disk or --kernel-image", code=Exit.USAGE)
    metadata: dict[str, Any] = {"name": flags.name}
    if flags.namespace:
        metadata["namespace"] = flags.namespace
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": metadata,
        "spec": {
            "runStrategy": str(flags.run_strategy),
            "template": {
                "metadata": {"labels": {"kubevirt.io/vm": flags.name}},
                "spec": {
                    "terminationGracePeriodSeconds": flags.grace,
                    "domain": domain,
                    "networks": [{"name": "default", "pod": {}}],
                    "volumes": volumes,
                },
            },
        },
    }


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
