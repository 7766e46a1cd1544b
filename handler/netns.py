"""Commands in a launcher pod's network namespace, and how to find that namespace.

The handler runs in the node's PID namespace (hostPID, privileged), so the PID a launcher's
command socket reports as its peer (SO_PEERCRED) is a PID it can see: `/proc/<pid>/ns/net`
is the pod's network namespace, entered with `nsenter` (util-linux), which runs `ip`
(iproute2) and `nft` (nftables) there: a query per command, the changes of one wiring in
one `batch` (each nsenter costs a fork and two execs, tens of ms on a loaded node). Every
command has a timeout.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from handler.errors import SyncError, SyncReason
from shared.wire.unixpath import short_path

COMMAND_TIMEOUT = 10.0
# $1: `ip -batch` lines, $2: an nftables ruleset (either may be empty), then pairs of a
# /proc/sys path and its value. Texts reach the shell as arguments, never as code.
_BATCH_SCRIPT = """set -e
[ -z "$1" ] || printf '%s' "$1" | ip -batch -
nft="$2"; shift 2
while [ "$#" -gt 0 ]; do printf '%s\\n' "$2" > "/proc/sys/$1"; shift 2; done
[ -z "$nft" ] || printf '%s' "$nft" | nft -f -
"""
_UCRED = struct.Struct("3i")  # pid, uid, gid


class WiringError(Exception):
    """The pod's namespace could not be wired (a tool failed or is missing)."""


class CannotWire(WiringError):
    """This node cannot wire pods at all: the reason is said, user-mode networking serves."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Launcher:
    pid: int
    uid: int


def launcher_process(sock_path: Path, *, proc: Path = Path("/proc")) -> Launcher:
    """The launcher's PID and user, as this handler sees them, from its command socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(COMMAND_TIMEOUT)
        try:
            with short_path(sock_path) as path:
                s.connect(path)
        except OSError as e:
            raise SyncError(SyncReason.SYNC_FAILED, f"launcher socket: {e}") from e
        pid, uid, _gid = _UCRED.unpack(s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    if pid <= 0:
        raise CannotWire("the launcher's PID is not visible (virt-handler needs hostPID)")
    mine, theirs = proc / "self" / "ns" / "net", proc / str(pid) / "ns" / "net"
    try:
        same = os.stat(mine).st_ino == os.stat(theirs).st_ino
    except OSError as e:
        raise CannotWire(f"the launcher's network namespace is not reachable: {e}") from e
    if same:
        raise CannotWire("the launcher shares virt-handler's network namespace (no pod network)")
    return Launcher(pid=pid, uid=uid)


async def run(pid: int, *argv: str, stdin: str | None = None, label: str = "") -> str:
    """`argv` in the network namespace of `pid`; its stdout, or WiringError with stderr
    (named by `label`, else by the command line)."""
    what = label or " ".join(argv)
    cmd = ("nsenter", f"--target={pid}", "--net", "--", *argv)
    try:
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError as e:
        raise CannotWire(f"nsenter is not installed: {e}") from e
    try:
        out, err = await asyncio.wait_for(
            proc.communicate(stdin.encode() if stdin is not None else None), COMMAND_TIMEOUT
        )
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise WiringError(f"{what}: no answer within {COMMAND_TIMEOUT}s") from None
    if proc.returncode == 127 or (b"No such file" in err and proc.returncode != 0):
        raise CannotWire(f"{argv[0]} is not installed: {err.decode(errors='replace').strip()}")
    if proc.returncode != 0:
        raise WiringError(f"{what}: {err.decode(errors='replace').strip()}")
    return out.decode()


async def ip_json(pid: int, *argv: str) -> list[dict[str, Any]]:
    """`ip -j ARGV` in the namespace, parsed."""
    out = await run(pid, "ip", "-j", *argv)
    parsed: list[dict[str, Any]] = json.loads(out) if out.strip() else []
    return parsed


async def sysctl(pid: int, key: str, value: str) -> None:
    """A per-namespace sysctl (net.*): written from inside the namespace."""
    path = "/proc/sys/" + key.replace(".", "/")
    await run(pid, "sh", "-c", 'echo "$1" > "$2"', "sh", value, path)


def batch_argv(
    *, ip: Sequence[Sequence[str]], sysctls: Mapping[str, str], nft: str
) -> tuple[str, ...]:
    """The `sh` command line of `batch`: ip commands one per line (their words never hold
    blanks: names, numbers, addresses), sysctl keys as /proc/sys paths."""
    lines = "".join(" ".join(words) + "\n" for words in ip)
    pairs = [part for key, value in sysctls.items() for part in (key.replace(".", "/"), value)]
    return ("sh", "-c", _BATCH_SCRIPT, "netns-batch", lines, nft, *pairs)


async def batch(
    pid: int,
    *,
    ip: Sequence[Sequence[str]],
    sysctls: Mapping[str, str] | None = None,
    nft: str = "",
) -> None:
    """`ip` commands (one `ip -batch`, stopping at the first failure), then per-namespace
    sysctls, then an nftables ruleset, in one nsenter; WiringError names what failed."""
    label = "; ".join([*(" ".join(["ip", *words]) for words in ip), *(["nft -f -"] if nft else [])])
    await run(pid, *batch_argv(ip=ip, sysctls=sysctls or {}, nft=nft), label=label)
