"""`ssh` and `scp`: the system's OpenSSH client, tunnelled through the portforward subresource.

As KubeVirt's `virtctl ssh --local-ssh`: ssh's ProxyCommand is `virtctl-py port-forward
--stdio vmi/NAME PORT` with this invocation's kubeconfig, context and namespace, so the
guest's sshd is reached with no Service, no node port and no route to the pod network.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from virtctl_py.errors import CliError, Exit
from virtctl_py.session import Target
from virtctl_py.streams import ForwardTarget

REMOTE_PREFIXES = ("vmi/", "vm/")


@dataclass(frozen=True, slots=True, kw_only=True)
class SshOptions:
    port: int = 22
    identity: str | None = None
    user: str | None = None
    ssh_opts: tuple[str, ...] = ()  # -t/--local-ssh-opts, passed to ssh/scp as given


@dataclass(frozen=True, slots=True, kw_only=True)
class Remote:
    """`[user@]vmi/NAME[.NS]` (and for scp `:PATH` after it)."""

    user: str | None
    where: ForwardTarget

    @classmethod
    def parse(cls, text: str) -> Remote:
        user, at, rest = text.rpartition("@")
        return cls(user=user if at else None, where=ForwardTarget.parse(rest))


def _host(where: ForwardTarget, namespace: str) -> str:
    """The name ssh knows the guest by (its known_hosts key): `vmi-NAME.NS`."""
    return f"{where.resource}-{where.name}.{namespace}"


def _namespace(target: Target, where: ForwardTarget) -> str:
    return where.namespace or target.namespace


def proxy_command(target: Target, where: ForwardTarget, port: int) -> str:
    """`port-forward --stdio` of this very virtctl-py, connected the same way."""
    argv = [sys.executable, "-m", "virtctl_py", "--kubeconfig", str(target.kubeconfig)]
    if target.context:
        argv += ["--context", target.context]
    argv += ["-n", _namespace(target, where), "port-forward", "--stdio"]
    argv += [f"{where.resource}/{where.name}", str(port)]
    return shlex.join(argv)


def _common(target: Target, where: ForwardTarget, opts: SshOptions) -> list[str]:
    args = ["-o", f"ProxyCommand={proxy_command(target, where, opts.port)}"]
    if opts.identity:
        args += ["-i", opts.identity]
    for opt in opts.ssh_opts:
        args += shlex.split(opt)
    return args


def ssh_argv(target: Target, remote: Remote, opts: SshOptions, command: Sequence[str]) -> list[str]:
    """The ssh command line for `virtctl-py ssh`."""
    user = remote.user or opts.user
    host = _host(remote.where, _namespace(target, remote.where))
    destination = f"{user}@{host}" if user else host
    return ["ssh", *_common(target, remote.where, opts), destination, *command]


def scp_argv(
    target: Target, sources: Sequence[str], destination: str, opts: SshOptions, *, recursive: bool
) -> list[str]:
    """The scp command line; exactly one side names the guest (`[user@]vmi/NAME:PATH`)."""
    paths = [*sources, destination]
    remotes = [p for p in paths if _is_remote(p)]
    if len(remotes) != 1 or (len(sources) > 1 and not _is_remote(destination)):
        raise CliError(
            "scp: name the guest once, as [user@]vmi/NAME[.NS]:PATH, on one side only",
            code=Exit.USAGE,
        )
    where: ForwardTarget | None = None
    rewritten = []
    for path in paths:
        if not _is_remote(path):
            rewritten.append(path)
            continue
        spec, _, guest_path = path.partition(":")
        remote = Remote.parse(spec)
        where = remote.where
        user = remote.user or opts.user
        host = _host(where, _namespace(target, where))
        rewritten.append(f"{user + '@' if user else ''}{host}:{guest_path}")
    assert where is not None
    return ["scp", *(["-r"] if recursive else []), *_common(target, where, opts), *rewritten]


def _is_remote(path: str) -> bool:
    spec, colon, _ = path.partition(":")
    return bool(colon) and spec.rpartition("@")[2].startswith(REMOTE_PREFIXES)


async def run_client(argv: Sequence[str]) -> str:
    """Run ssh/scp attached to our terminal; its failure is ours, with its exit code."""
    proc = await asyncio.create_subprocess_exec(*argv)
    code = await proc.wait()
    if code != 0:
        raise CliError(f"{argv[0]} exited with code {code}", code=Exit.FAILED)
    return ""
