"""`virtctl-py version`: the client's version and the server's, through the aggregated API.

One GET over the synchronous client (virtctl_py.rest): the command never imports asyncio,
aiohttp, the metrics or the model, and answers in about the time Python takes to start.
"""

from __future__ import annotations

import argparse

from shared.kube.errors import KubeError
from virtctl_py.rest import Rest
from virtctl_py.session import Target

VERSION = "0.1.0"
PATH = "/apis/subresources.kubevirt.io/v1/version"


def version(api: Rest, target: Target, args: argparse.Namespace) -> str:
    """Client Version and Server Version lines, as KubeVirt's virtctl prints them."""
    lines = [f"Client Version: virtctl-py {VERSION}"]
    try:
        server = api.request("GET", PATH)
        lines.append(f"Server Version: {server.get('gitVersion', server)}")
    except KubeError as exc:  # the client version is still worth printing
        lines.append(f"Server Version: unavailable ({exc})")
    return "\n".join(lines)
