"""The verbs: KubeVirt's subresource API (VM verbs, VMI actions), object reads for --wait."""

from __future__ import annotations

import argparse
import base64
import binascii
from collections.abc import Mapping
from typing import Any

import yaml

from shared.actions import ACTIONS, Action
from shared.kube import (
    SERVICES,
    VMI_ACTIONS,
    VMIMS,
    VMIS,
    VMS,
    KubeClient,
    NotFound,
)
from shared.model import RunStrategy, VirtualMachine, VirtualMachineInstance
from virtctl_py import createobjects, lifecycle, manifests
from virtctl_py.errors import CliError, Exit
from virtctl_py.output import epoch_time, render
from virtctl_py.session import Target
from virtctl_py.wait import wait_until

# virtctl verb → the VMI action it calls (shared.actions has the method and path).
CLI_ACTIONS: Mapping[str, Action] = {
    "pause": Action.PAUSE,
    "unpause": Action.UNPAUSE,
    "soft-reboot": Action.SOFT_REBOOT,
    "guestosinfo": Action.GUEST_OS_INFO,
    "userlist": Action.USER_LIST,
    "fslist": Action.FILESYSTEM_LIST,
}

GUEST_COLUMNS = {
    "userlist": (("USER", "userName"), ("DOMAIN", "domain"), ("LOGIN-TIME", "loginTime")),
    "filesystemlist": (
        ("DISK", "diskName"), ("MOUNT", "mountPoint"), ("TYPE", "fileSystemType"),
        ("TOTAL", "totalBytes"), ("USED", "usedBytes"),
    ),
}  # fmt: skip


async def _vm(kube: KubeClient, ns: str, name: str) -> VirtualMachine:
    return VirtualMachine.from_dict(await kube.get(VMS, name, namespace=ns))


async def _vmi_or_none(kube: KubeClient, ns: str, name: str) -> VirtualMachineInstance | None:
    try:
        return VirtualMachineInstance.from_dict(await kube.get(VMIS, name, namespace=ns))
    except NotFound:
        return None


def verb_options(args: argparse.Namespace) -> lifecycle.VerbOptions:
    """--dry-run, --paused, --force with --grace-period, as upstream virtctl takes them."""
    grace: int = getattr(args, "grace_period", -1)
    force: bool = getattr(args, "force", False)
    if grace >= 0 and not force:
        raise CliError("--grace-period must be used with --force", code=Exit.USAGE)
    if force and grace < 0:
        raise CliError("--force needs --grace-period", code=Exit.USAGE)
    return lifecycle.VerbOptions(
        dry_run=getattr(args, "dry_run", False),
        paused=getattr(args, "paused", False),
        grace_period=grace if force else None,
    )


async def _put_verb(kube: KubeClient, ns: str, args: argparse.Namespace) -> bool:
    opts = verb_options(args)
    await kube.call_subresource(
        "PUT", lifecycle.VM_SUBRESOURCES, args.name, namespace=ns,
        subresource=args.command, body=lifecycle.body(args.command, opts),
    )  # fmt: skip
    return opts.dry_run


async def vm_state(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    """start / stop / restart a VM; with --wait, until it is Running / Stopped."""
    ns = target.namespace
    restarting = args.command == "restart" and args.wait
    before = await _vmi_or_none(kube, ns, args.name) if restarting else None
    dry_run = await _put_verb(kube, ns, args)
    if args.wait and not dry_run:
        wanted = "Stopped" if args.command == "stop" else "Running"
        old_uid = before.uid if before is not None else None

        async def probe() -> tuple[bool, str]:
            fresh = await _vm(kube, ns, args.name)
            current = await _vmi_or_none(kube, ns, args.name)
            status = str(fresh.status.printable_status or "")
            moved = old_uid is None or (current is not None and current.uid != old_uid)
            return status == wanted and moved, status or "Unknown"

        await wait_until(probe, what=f"vm {ns}/{args.name}", timeout=args.timeout)
    return lifecycle.scheduled(args.command, args.name, dry_run=dry_run)


async def _migrations_of(kube: KubeClient, ns: str, vmi: str) -> list[dict[str, Any]]:
    listed = await kube.list(VMIMS, namespace=ns)
    return [m for m in listed.items if m.get("spec", {}).get("vmiName") == vmi]


async def migrate(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    """PUT migrate (the API creates the VMIM); with --wait, until that VMIM ends."""
    ns = target.namespace
    known = {m["metadata"]["name"] for m in await _migrations_of(kube, ns, args.name)}
    dry_run = await _put_verb(kube, ns, args)
    if args.wait and not dry_run:

        async def probe() -> tuple[bool, str]:
            fresh = [
                m for m in await _migrations_of(kube, ns, args.name)
                if m["metadata"]["name"] not in known
            ]  # fmt: skip
            if not fresh:
                return False, "Pending"
            name = fresh[0]["metadata"]["name"]
            phase = str(fresh[0].get("status", {}).get("phase") or "Pending")
            if phase == "Failed":
                raise CliError(f"migration {name} failed", code=Exit.FAILED)
            return phase == "Succeeded", f"{name} {phase}"

        await wait_until(probe, what=f"migration of {ns}/{args.name}", timeout=args.timeout)
    return lifecycle.scheduled("migrate", args.name, dry_run=dry_run)


async def migrate_cancel(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    migrations = await kube.list(VMIMS, namespace=target.namespace)
    active = [
        m for m in migrations.items
        if m.get("spec", {}).get("vmiName") == args.name
        and m.get("status", {}).get("phase") not in ("Succeeded", "Failed")
    ]  # fmt: skip
    if not active:
        raise CliError(
            f"no migration in progress for VMI {target.namespace}/{args.name}", code=Exit.NOT_FOUND
        )
    for m in active:
        await kube.delete(VMIMS, m["metadata"]["name"], namespace=target.namespace)
    return (
        f"VMI {target.namespace}/{args.name}: migration {active[0]['metadata']['name']} cancelled"
    )


async def action(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    """pause / unpause / soft-reboot through subresources.kubevirt.io (RBAC applies)."""
    spec = ACTIONS[CLI_ACTIONS[args.command]]
    await kube.call_subresource(
        spec.method,
        VMI_ACTIONS,
        args.name,
        namespace=target.namespace,
        subresource=spec.action,
        body={},
    )
    verb = {"pause": "paused", "unpause": "unpaused", "soft-reboot": "soft-rebooted"}[args.command]
    return f"VMI {target.namespace}/{args.name} was scheduled to be {verb}"


async def guest_query(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    spec = ACTIONS[CLI_ACTIONS[args.command]]
    sub = str(spec.action)
    data = await kube.call_subresource(
        spec.method, VMI_ACTIONS, args.name, namespace=target.namespace, subresource=sub
    )
    formats = {"loginTime": epoch_time}
    return render(data, fmt=args.output, columns=GUEST_COLUMNS.get(sub, ()), formats=formats)


async def expose(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    if args.kind == "vm":
        vm = await _vm(kube, target.namespace, args.name)
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


def volume_body(args: argparse.Namespace) -> dict[str, Any]:
    """AddVolumeOptions / RemoveVolumeOptions as upstream virtctl sends them: the volume,
    its disk and its serial all take the claim's name unless told."""
    name: str = args.volume_name
    body: dict[str, Any] = {"name": name}
    if args.command == "addvolume":
        body["disk"] = {"name": name, "serial": args.serial or name, "disk": {"bus": args.bus}}
        body["volumeSource"] = {"persistentVolumeClaim": {"claimName": name, "hotpluggable": True}}
    if args.dry_run:
        body["dryRun"] = ["All"]
    return body


async def volume(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    """addvolume / removevolume: on the VMI, or with --persist on the VM (and its VMI)."""
    resource = lifecycle.VM_SUBRESOURCES if args.persist else VMI_ACTIONS
    await kube.call_subresource(
        "PUT", resource, args.name, namespace=target.namespace,
        subresource=args.command, body=volume_body(args),
    )  # fmt: skip
    what = "add" if args.command == "addvolume" else "remove"
    return (
        f"Successfully submitted {what} volume request to VM {args.name} "
        f"for volume {args.volume_name}"
    )
