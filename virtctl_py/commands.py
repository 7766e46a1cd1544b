"""The verbs that are one or two API requests: KubeVirt's subresource API (VM verbs, VMI
actions, hotplug) and the object reads of --wait, over the synchronous client (rest.Rest).

Nothing here imports asyncio, aiohttp or the model: objects are read as the raw dicts the
API answered (a VM's printableStatus, a VMI's uid, a migration's phase), so each verb costs
the interpreter's start and its requests.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from shared.kube.errors import NotFound
from shared.kube.resources import DATAVOLUMES, VMI_ACTIONS, VMIMS, VMIS, VMS
from virtctl_py import lifecycle
from virtctl_py.errors import CliError, Exit
from virtctl_py.rest import Rest
from virtctl_py.session import Target
from virtctl_py.wait import poll_until

# virtctl verb → (HTTP method, the VMI's subresource): shared.actions.ACTIONS' rows, spelled
# out so that a verb loads no action table (it imports the launcher's wire contract); a unit
# test keeps the two equal.
CLI_ACTIONS: Mapping[str, tuple[str, str]] = {
    "pause": ("PUT", "pause"),
    "unpause": ("PUT", "unpause"),
    "soft-reboot": ("PUT", "softreboot"),
    "guestosinfo": ("GET", "guestosinfo"),
    "userlist": ("GET", "userlist"),
    "fslist": ("GET", "filesystemlist"),
}

GUEST_COLUMNS = {
    "userlist": (("USER", "userName"), ("DOMAIN", "domain"), ("LOGIN-TIME", "loginTime")),
    "filesystemlist": (
        ("DISK", "diskName"), ("MOUNT", "mountPoint"), ("TYPE", "fileSystemType"),
        ("TOTAL", "totalBytes"), ("USED", "usedBytes"),
    ),
}  # fmt: skip


def _vmi_uid(api: Rest, ns: str, name: str) -> str | None:
    """The VMI's uid, None when there is none."""
    try:
        return str(api.get(VMIS, name, namespace=ns).get("metadata", {}).get("uid") or "")
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


def _put_verb(api: Rest, ns: str, args: argparse.Namespace) -> bool:
    opts = verb_options(args)
    api.subresource(
        "PUT", lifecycle.VM_SUBRESOURCES, args.name, namespace=ns,
        subresource=args.command, body=lifecycle.body(args.command, opts),
    )  # fmt: skip
    return opts.dry_run


def vm_state(api: Rest, target: Target, args: argparse.Namespace) -> str:
    """start / stop / restart a VM; with --wait, until it is Running / Stopped."""
    ns = target.namespace
    restarting = args.command == "restart" and args.wait
    old_uid = _vmi_uid(api, ns, args.name) if restarting else None
    dry_run = _put_verb(api, ns, args)
    if args.wait and not dry_run:
        wanted = "Stopped" if args.command == "stop" else "Running"

        def probe() -> tuple[bool, str]:
            fresh = api.get(VMS, args.name, namespace=ns)
            current = _vmi_uid(api, ns, args.name)
            status = str((fresh.get("status") or {}).get("printableStatus") or "")
            moved = not old_uid or (current is not None and current != old_uid)
            return status == wanted and moved, status or "Unknown"

        poll_until(probe, what=f"vm {ns}/{args.name}", timeout=args.timeout)
    return lifecycle.scheduled(args.command, args.name, dry_run=dry_run)


def _migrations_of(api: Rest, ns: str, vmi: str) -> list[dict[str, Any]]:
    return [m for m in api.list(VMIMS, namespace=ns) if m.get("spec", {}).get("vmiName") == vmi]


def migrate(api: Rest, target: Target, args: argparse.Namespace) -> str:
    """PUT migrate (the API creates the VMIM); with --wait, until that VMIM ends."""
    ns = target.namespace
    known = {m["metadata"]["name"] for m in _migrations_of(api, ns, args.name)}
    dry_run = _put_verb(api, ns, args)
    if args.wait and not dry_run:

        def probe() -> tuple[bool, str]:
            fresh = [
                m for m in _migrations_of(api, ns, args.name)
                if m["metadata"]["name"] not in known
            ]  # fmt: skip
            if not fresh:
                return False, "Pending"
            name = fresh[0]["metadata"]["name"]
            phase = str(fresh[0].get("status", {}).get("phase") or "Pending")
            if phase == "Failed":
                raise CliError(f"migration {name} failed", code=Exit.FAILED)
            return phase == "Succeeded", f"{name} {phase}"

        poll_until(probe, what=f"migration of {ns}/{args.name}", timeout=args.timeout)
    return lifecycle.scheduled("migrate", args.name, dry_run=dry_run)


def migrate_cancel(api: Rest, target: Target, args: argparse.Namespace) -> str:
    active = [
        m for m in api.list(VMIMS, namespace=target.namespace)
        if m.get("spec", {}).get("vmiName") == args.name
        and m.get("status", {}).get("phase") not in ("Succeeded", "Failed")
    ]  # fmt: skip
    if not active:
        raise CliError(
            f"no migration in progress for VMI {target.namespace}/{args.name}", code=Exit.NOT_FOUND
        )
    for m in active:
        api.delete(VMIMS, m["metadata"]["name"], namespace=target.namespace)
    return (
        f"VMI {target.namespace}/{args.name}: migration {active[0]['metadata']['name']} cancelled"
    )


def action(api: Rest, target: Target, args: argparse.Namespace) -> str:
    """pause / unpause / soft-reboot through subresources.kubevirt.io (RBAC applies)."""
    method, sub = CLI_ACTIONS[args.command]
    api.subresource(
        method, VMI_ACTIONS, args.name, namespace=target.namespace, subresource=sub, body={}
    )
    verb = {"pause": "paused", "unpause": "unpaused", "soft-reboot": "soft-rebooted"}[args.command]
    return f"VMI {target.namespace}/{args.name} was scheduled to be {verb}"


def guest_query(api: Rest, target: Target, args: argparse.Namespace) -> str:
    from virtctl_py.output import epoch_time, render  # noqa: PLC0415 - yaml/datetime: only here

    method, sub = CLI_ACTIONS[args.command]
    data = api.subresource(
        method, VMI_ACTIONS, args.name, namespace=target.namespace, subresource=sub
    )
    formats = {"loginTime": epoch_time}
    return render(data, fmt=args.output, columns=GUEST_COLUMNS.get(sub, ()), formats=formats)


def volume_body(args: argparse.Namespace, *, datavolume: bool = False) -> dict[str, Any]:
    """AddVolumeOptions / RemoveVolumeOptions as upstream virtctl sends them: the volume,
    its disk and its serial all take the claim's name unless told; a dataVolume source
    when a DataVolume of that name exists."""
    name: str = args.volume_name
    body: dict[str, Any] = {"name": name}
    if args.command == "addvolume":
        body["disk"] = {"name": name, "serial": args.serial or name, "disk": {"bus": args.bus}}
        source = (
            {"dataVolume": {"name": name, "hotpluggable": True}}
            if datavolume
            else {"persistentVolumeClaim": {"claimName": name, "hotpluggable": True}}
        )
        body["volumeSource"] = source
    if args.dry_run:
        body["dryRun"] = ["All"]
    return body


def _is_datavolume(api: Rest, target: Target, name: str) -> bool:
    """Whether a DataVolume of this name exists (upstream virtctl's choice of source)."""
    try:
        api.get(DATAVOLUMES, name, namespace=target.namespace)
    except NotFound:
        return False
    return True


def volume(api: Rest, target: Target, args: argparse.Namespace) -> str:
    """addvolume / removevolume: on the VMI, or with --persist on the VM (and its VMI)."""
    resource = lifecycle.VM_SUBRESOURCES if args.persist else VMI_ACTIONS
    dv = args.command == "addvolume" and _is_datavolume(api, target, args.volume_name)
    api.subresource(
        "PUT", resource, args.name, namespace=target.namespace,
        subresource=args.command, body=volume_body(args, datavolume=dv),
    )  # fmt: skip
    what = "add" if args.command == "addvolume" else "remove"
    return (
        f"Successfully submitted {what} volume request to VM {args.name} "
        f"for volume {args.volume_name}"
    )
