"""`virtctl-py version`: the client's version and the server's, through the aggregated API.

Kept apart from the other verbs so it loads the client alone.
"""

from __future__ import annotations

import argparse

from shared.kube import VMI_ACTIONS, KubeClient, KubeError
from virtctl_py.session import Target

VERSION = "0.1.0"


async def version(kube: KubeClient, target: Target, args: argparse.Namespace) -> str:
    """Client Version and Server Version lines, as KubeVirt's virtctl prints them."""
    lines = [f"Client Version: virtctl-py {VERSION}"]
    try:
        server = await kube.get_path(VMI_ACTIONS, "version")
        lines.append(f"Server Version: {server.get('gitVersion', server)}")
    except KubeError as exc:  # the client version is still worth printing
        lines.append(f"Server Version: unavailable ({exc})")
    return "\n".join(lines)
