"""`virtctl-py version`: the client's version and the server's, through the aggregated API.

One request, so it goes through shared.kube.oneshot (the standard library's HTTP client)
instead of the full client: the command never imports aiohttp, the metrics or the model,
and answers in about the time Python takes to start.
"""

from __future__ import annotations

from shared.kube.connection import load_connection
from shared.kube.errors import KubeError
from shared.kube.oneshot import get_json
from virtctl_py.session import Target

VERSION = "0.1.0"
PATH = "/apis/subresources.kubevirt.io/v1/version"


async def version(target: Target) -> str:
    """Client Version and Server Version lines, as KubeVirt's virtctl prints them."""
    lines = [f"Client Version: virtctl-py {VERSION}"]
    try:
        conn = await load_connection(target.kubeconfig, context=target.context)
        server = await get_json(conn, PATH, timeout=target.request_timeout,
                                headers=target.headers, user_agent="virtctl-py")  # fmt: skip
        gitversion = server.get("gitVersion", server) if isinstance(server, dict) else server
        lines.append(f"Server Version: {gitversion}")
    except KubeError as exc:  # the client version is still worth printing
        lines.append(f"Server Version: unavailable ({exc})")
    return "\n".join(lines)
