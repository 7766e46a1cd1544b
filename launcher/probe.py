"""virt-probe-py: the launcher pod's exec probe for guestAgentPing and exec probes, run by
the kubelet in the compute container (KubeVirt's virt-probe). It asks the launcher, over its
command socket, to ping the guest agent or run a command in the guest: exit 0 on success,
1 on failure, each with one line on stderr saying why.

    virt-probe-py --timeout 1 ping
    virt-probe-py --timeout 2 exec -- cat /tmp/healthy
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from shared.podlayout import LAUNCHER_SOCKET, SOCKETS_DIR
from shared.wire.client import RpcClient, Tier
from shared.wire.errors import WireError
from shared.wire.launcher_api import GuestExecArgs, Method

DEFAULT_SOCKET = Path(SOCKETS_DIR) / LAUNCHER_SOCKET


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line: socket, timeout, then `ping` or `exec -- CMD...`."""
    p = argparse.ArgumentParser(prog="virt-probe-py")
    p.add_argument("--socket", type=Path, default=DEFAULT_SOCKET)
    p.add_argument("--timeout", type=int, default=1, help="seconds (the probe's timeoutSeconds)")
    sub = p.add_subparsers(dest="mode", required=True)
    sub.add_parser("ping", help="the guest agent answers guest-ping")
    ex = sub.add_parser("exec", help="a command in the guest exits 0")
    ex.add_argument("command", nargs="+")
    return p.parse_args(argv)


async def probe(args: argparse.Namespace) -> str | None:
    """None on success, else why the probe failed."""
    async with asyncio.timeout(args.timeout + 2), RpcClient.connect(args.socket) as client:
        if args.mode == "ping":
            await client.call(str(Method.GUEST_PING), tier=Tier.SHORT)
            return None
        call = GuestExecArgs(command=tuple(args.command), timeout_seconds=args.timeout)
        answer = await client.call(str(Method.GUEST_EXEC), call.to_wire(), tier=Tier.MEDIUM)
        code = answer.get("exitCode") if isinstance(answer, dict) else None
        return None if code == 0 else f"command exited {code}"


def main(argv: list[str] | None = None) -> None:
    """Exit 0 when the probe succeeds, 1 when it fails."""
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        why = asyncio.run(probe(args))
    except (WireError, TimeoutError, OSError) as e:
        why = f"{type(e).__name__}: {e}"
    if why is not None:
        print(f"probe failed: {why}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
