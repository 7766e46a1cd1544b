"""A local port forwarded to a pod's port through the API server, for virtctl-py's target
(shared.podforward does the work)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from shared.podforward import ChannelSocket
from shared.podforward import forward_pod as _forward_pod
from virtctl_py.session import Target

__all__ = ["ChannelSocket", "forward_pod"]


@contextlib.asynccontextmanager
async def forward_pod(
    target: Target, *, pod: str, port: int, local_port: int = 0
) -> AsyncIterator[int]:
    """Listen on 127.0.0.1 (`local_port`, 0: any free one) while the block runs."""
    config = target.client_config()
    async with _forward_pod(
        config, namespace=target.namespace, pod=pod, port=port, local_port=local_port
    ) as local:
        yield local
