"""The verbs that build objects: `create vm | instancetype | preference | clone` (manifests
from flags, no request) and `expose` (a Service for a VM or VMI, through the full client)."""

from __future__ import annotations

import argparse
import base64
import binascii

import yaml

from shared.kube import SERVICES, VMIS, VMS, KubeClient
from shared.model import RunStrategy, VirtualMachine, VirtualMachineInstance
from virtctl_py import createobjects, manifests
from virtctl_py.errors import CliError, Exit
from virtctl_py.session import Target


async def expose(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    if args.kind == "vm":
        vm = VirtualMachine.from_dict(await kube.get(VMS, args.name, namespace=target.namespace))
        labels = dict(vm.spec.template.metadata.labels or {})
    else:
        vmi = VirtualMachineInstance.from_dict(
            await kube.get(VMIS, args.name, namespace=target.namespace)
        )
        labels = dict(vmi.metadata.labels or {})
    service = manifests.service_manifest(
        name=args.service_name, namespace=target.namespace, selector=labels,
        port=args.port, target_port=args.target_port or args.port, service_type=args.type,
    )  # fmt: skip
    await kube.create(SERVICES, service, namespace=target.namespace)
    return f"Service {target.namespace}/{args.service_name} created"


def _user_data(args: argparse.Namespace) -> str | None:
    """--cloud-init-user-data is base64 (upstream); --user-data plain text."""
    if args.cloud_init_user_data is not None and args.user_data is not None:
        raise CliError("give --cloud-init-user-data or --user-data, not both", code=Exit.USAGE)
    if args.cloud_init_user_data is None:
        return str(args.user_data) if args.user_data is not None else None
    try:
        return base64.b64decode(args.cloud_init_user_data, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as e:
        raise CliError(
            f"--cloud-init-user-data must be base64-encoded: {e}", code=Exit.USAGE
        ) from e


def create(args: argparse.Namespace, namespace: str | None) -> str:
    """`create vm | instancetype | preference | clone`: the manifest as YAML."""
    if args.kind == "vm":
        return create_vm(args, namespace)
    manifest = createobjects.RENDERERS[args.kind](args, namespace)
    return yaml.safe_dump(manifest, sort_keys=False).rstrip()


def create_vm(args: argparse.Namespace, namespace: str | None) -> str:
    VolumeFlag = manifests.VolumeFlag
    manifests.exclusive({
        "memory": args.memory is not None,
        "instancetype": args.instancetype is not None,
        "infer-instancetype": args.infer_instancetype is not None,
        "infer-instancetype-from": args.infer_instancetype_from is not None,
    })  # fmt: skip
    manifests.exclusive({
        "preference": args.preference is not None,
        "infer-preference": args.infer_preference is not None,
        "infer-preference-from": args.infer_preference_from is not None,
    })  # fmt: skip
    flags = manifests.VMFlags(
        name=args.name, namespace=namespace, memory=args.memory, cpus=args.cpus,
        run_strategy=RunStrategy(args.run_strategy),
        container_disks=tuple(
            VolumeFlag.parse(v, flag="--volume-containerdisk") for v in args.container_disks
        ),
        pvcs=tuple(VolumeFlag.parse(v, flag="--volume-pvc") for v in args.pvcs),
        instancetype=args.instancetype, preference=args.preference,
        infer_instancetype=manifests.Inference.of(
            args.infer_instancetype, args.infer_instancetype_from
        ),
        infer_preference=manifests.Inference.of(args.infer_preference, args.infer_preference_from),
        kernel_image=args.kernel_image, kernel_args=args.kernel_args,
        user_data=_user_data(args), grace=args.grace,
    )  # fmt: skip
    return yaml.safe_dump(manifests.vm_manifest(flags), sort_keys=False).rstrip()
