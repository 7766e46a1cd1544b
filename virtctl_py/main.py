"""virtctl-py (also `kubectl virt`): KubeVirt's CLI verbs against the Kubernetes API only."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence

from shared.kube import ApiError, Conflict, Forbidden, KubeClient, KubeError, NotFound
from virtctl_py import cli, commands
from virtctl_py.console import console
from virtctl_py.errors import CliError, Exit
from virtctl_py.session import Target, resolve

Verb = Callable[[KubeClient, Target, argparse.Namespace], Awaitable[str]]
VERBS: Mapping[str, Verb] = {
    "start": commands.vm_state,
    "stop": commands.vm_state,
    "restart": commands.vm_state,
    "pause": commands.action,
    "unpause": commands.action,
    "soft-reboot": commands.action,
    "migrate": commands.migrate,
    "migrate-cancel": commands.migrate_cancel,
    "guestosinfo": commands.guest_query,
    "userlist": commands.guest_query,
    "fslist": commands.guest_query,
    "expose": commands.expose,
    "version": commands.version,
}


async def run(args: argparse.Namespace, target: Target) -> str:
    if args.command == "console":
        return await console(target, args.name, timeout=args.timeout)
    kube = await target.connect()
    try:
        return await VERBS[args.command](kube, target, args)
    finally:
        await kube.close()


def explain(exc: KubeError, args: argparse.Namespace, target: Target) -> CliError:
    """Turn an API error into a message naming the object and what to do, with its exit code."""
    obj = f"{getattr(args, 'kind', None) or 'vm'} {target.namespace}/{getattr(args, 'name', '')}"
    if isinstance(exc, NotFound):
        return CliError(
            f"{obj} not found: check the name and the namespace (-n)", code=Exit.NOT_FOUND
        )
    if isinstance(exc, Forbidden):
        return CliError(
            f"not allowed to {args.command} {obj}: {exc}. Ask an admin for a RoleBinding to "
            "kubevirt.io:edit (or the right verb on subresources.kubevirt.io)",
            code=Exit.FORBIDDEN,
        )
    if isinstance(exc, Conflict):
        return CliError(f"{obj} changed while we wrote it; try again", code=Exit.CONFLICT)
    if isinstance(exc, ApiError):
        return CliError(f"{args.command} {obj} failed: {exc}")
    return CliError(f"cannot reach the cluster: {exc}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli.build()
    args = parser.parse_args(argv)
    if args.command == "completion":
        print(cli.bash_completion(parser))
        return
    target = resolve(kubeconfig=args.kubeconfig, context=args.context, namespace=args.namespace)
    if args.command == "create":
        print(commands.create_vm(args, args.namespace))
        return
    try:
        out = asyncio.run(run(args, target))
    except KubeError as exc:
        err = explain(exc, args, target)
        print(f"error: {err}", file=sys.stderr)
        sys.exit(err.code)
    except CliError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(err.code)
    if out:
        print(out)


if __name__ == "__main__":
    main()
