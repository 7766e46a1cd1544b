"""What a parsed virtctl-py command does: the verbs, their connection, their errors.

Imported by virtctl_py.main only once the command line is parsed, so `--help`, `completion`
and usage errors never load the Kubernetes client.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from shared.kube.errors import ApiError, Conflict, Forbidden, KubeError, NotFound
from virtctl_py import kubeconfig, session
from virtctl_py.errors import CliError, Exit
from virtctl_py.session import Target

if TYPE_CHECKING:  # the verbs' modules load when they run: a quick verb never loads aiohttp
    from shared.kube import KubeClient
    from virtctl_py import ssh
    from virtctl_py.rest import Rest

SyncVerb = Callable[["Rest", Target, argparse.Namespace], str]
Verb = Callable[["KubeClient", Target, argparse.Namespace], Awaitable[str]]
# verb → "module:function" under virtctl_py, imported when the verb runs. QUICK_VERBS are
# one or two requests (and --wait's polls) over the synchronous client (virtctl_py.rest):
# no asyncio, aiohttp or model import, so they answer in about the interpreter's start. A
# new verb of that kind belongs here, with a function taking a rest.Rest.
QUICK_VERBS: Mapping[str, str] = {
    "start": "commands:vm_state",
    "stop": "commands:vm_state",
    "restart": "commands:vm_state",
    "pause": "commands:action",
    "unpause": "commands:action",
    "soft-reboot": "commands:action",
    "migrate": "commands:migrate",
    "migrate-cancel": "commands:migrate_cancel",
    "guestosinfo": "commands:guest_query",
    "userlist": "commands:guest_query",
    "fslist": "commands:guest_query",
    "addvolume": "commands:volume",
    "removevolume": "commands:volume",
    "version": "version:version",
    "credentials": "credentials:credentials",
}
# The verbs on the full asynchronous client (the model, several objects, streams).
VERBS: Mapping[str, str] = {
    "expose": "objects:expose",
    "vmexport": "vmexport:vmexport",
    "memory-dump": "memorydump:memory_dump",
    "image-upload": "imageupload:image_upload",
}


def _load(table: Mapping[str, str], name: str) -> Any:
    module, function = table[name].split(":")
    return getattr(importlib.import_module(f"virtctl_py.{module}"), function)


def quick_verb(name: str) -> SyncVerb:
    """The function that runs quick verb `name`."""
    found: SyncVerb = _load(QUICK_VERBS, name)
    return found


def verb(name: str) -> Verb:
    """The coroutine function that runs verb `name`."""
    found: Verb = _load(VERBS, name)
    return found


def answer(args: argparse.Namespace, target: Target) -> str:
    """Run the parsed command: a quick verb here, the others on an event loop."""
    if args.command in QUICK_VERBS:
        from virtctl_py.rest import Rest  # noqa: PLC0415

        with Rest.open(target) as api:
            return quick_verb(args.command)(api, target, args)
    import asyncio  # noqa: PLC0415 - only the verbs on the asynchronous client load it

    return asyncio.run(run(args, target))


async def _port_forward(target: Target, args: argparse.Namespace) -> str:
    from virtctl_py import streams  # noqa: PLC0415

    where = streams.ForwardTarget.parse(args.target)
    if where.namespace:
        target = dataclasses.replace(target, namespace=where.namespace)
    mappings = [streams.port_mapping(p) for p in args.ports]
    if args.stdio:
        if len(mappings) != 1:
            raise CliError("--stdio forwards exactly one port", code=Exit.USAGE)
        return await streams.stdio_forward(target, where, mappings[0].remote)
    return await streams.port_forward(target, where, mappings, address=args.address)


def _ssh_options(args: argparse.Namespace) -> ssh.SshOptions:
    from virtctl_py import ssh, streams  # noqa: PLC0415

    return ssh.SshOptions(
        port=streams.port_number(str(args.port)),
        identity=args.identity_file,
        user=args.username,
        ssh_opts=tuple(args.local_ssh_opts),
    )


async def _ssh(target: Target, args: argparse.Namespace) -> str:
    from virtctl_py import ssh  # noqa: PLC0415

    command = [args.remote_command] if args.remote_command else []
    remote = ssh.Remote.parse(args.destination)
    return await ssh.run_client(ssh.ssh_argv(target, remote, _ssh_options(args), command))


async def _scp(target: Target, args: argparse.Namespace) -> str:
    if len(args.paths) < 2:
        raise CliError("scp needs a SOURCE and a DESTINATION", code=Exit.USAGE)
    *sources, destination = args.paths
    from virtctl_py import ssh  # noqa: PLC0415

    argv = ssh.scp_argv(target, sources, destination, _ssh_options(args), recursive=args.recursive)
    return await ssh.run_client(argv)


REMOTE_VERBS: Mapping[str, Callable[[Target, argparse.Namespace], Awaitable[str]]] = {
    "port-forward": _port_forward,
    "ssh": _ssh,
    "scp": _scp,
}


async def run(args: argparse.Namespace, target: Target) -> str:
    if args.command == "console":
        from virtctl_py.console import console  # noqa: PLC0415

        return await console(target, args.name, timeout=args.timeout * 60)
    if args.command == "vnc":
        from virtctl_py import streams  # noqa: PLC0415

        listen = streams.Listen(address=args.address, port=args.port)
        name = args.name.removeprefix("vmi/")
        return await streams.vnc(target, name, listen=listen, proxy_only=args.proxy_only)
    if args.command in REMOTE_VERBS:
        return await REMOTE_VERBS[args.command](target, args)
    kube = await target.connect()
    try:
        return await verb(args.command)(kube, target, args)
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
    if isinstance(exc, Conflict):  # the API's reason: "VM is already running", …
        return CliError(f"cannot {args.command} {obj}: {exc.message}", code=Exit.CONFLICT)
    if isinstance(exc, ApiError):
        return CliError(f"{args.command} {obj} failed: {exc}")
    return CliError(f"cannot reach the cluster: {exc}")


def overrides(args: argparse.Namespace) -> kubeconfig.Overrides:
    """kubectl's connection flags as parsed (before or after the verb)."""
    return kubeconfig.Overrides(
        context=args.context,
        cluster=args.cluster,
        user=args.user,
        namespace=args.namespace,
        server=args.server,
        token=args.token,
        insecure_skip_tls_verify=args.insecure_skip_tls_verify,
        impersonate=args.impersonate,
        impersonate_groups=tuple(args.impersonate_groups or ()),
    )


def _fail(err: CliError) -> NoReturn:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(err.code)


def execute(args: argparse.Namespace) -> None:
    """Run the parsed command; print its answer or fail with its exit code."""
    if args.command == "create":
        from virtctl_py import objects  # noqa: PLC0415 - the model loads for create only

        try:
            print(objects.create(args, args.namespace))
        except CliError as err:
            _fail(err)
        return
    try:
        with session.resolved(
            overrides(args),
            kubeconfig_flag=args.kubeconfig,
            timeout=args.request_timeout,
            environ=os.environ,
            home=Path.home(),
        ) as target:
            try:
                out = answer(args, target)
            except KubeError as exc:
                _fail(explain(exc, args, target))
    except CliError as err:
        _fail(err)
    if out:
        _print(out)


def _print(text: str) -> None:
    """Print the answer; a reader that went away (`| head`) ends us quietly, as kubectl."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        sys.exit(0)
