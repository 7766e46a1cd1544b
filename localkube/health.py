"""Readiness probes for the components: poll an HTTP endpoint until it answers 200.

A probe gives up early when the process it waits for has died, and its error carries
the tail of that process's log, so a failed ``up`` says why.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from pathlib import Path

import aiohttp

from localkube.errors import ComponentFailed
from localkube.pki import Pki


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 16384))
            return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def admin_ssl(pki: Pki) -> ssl.SSLContext:
    """TLS to the apiserver as kubernetes-admin (system:masters)."""
    ctx = ssl.create_default_context(cafile=str(pki.crt("ca")))
    ctx.load_cert_chain(str(pki.crt("admin")), str(pki.key("admin")))
    return ctx


def insecure_ssl() -> ssl.SSLContext:
    """For /healthz of kube-controller-manager and kube-scheduler (self-signed certs)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


async def probe(
    url: str, *, ssl_ctx: ssl.SSLContext | bool = False, limit: int | None = 500
) -> tuple[int, str]:
    """One GET; (status, body) or (0, error text)."""
    try:
        async with (
            asyncio.timeout(5),
            aiohttp.ClientSession() as session,
            session.get(url, ssl=ssl_ctx) as resp,
        ):
            body = await resp.text()
            return resp.status, body[:limit] if limit else body
    except (aiohttp.ClientError, TimeoutError, OSError) as e:
        return 0, f"{type(e).__name__}: {e}"


async def wait_healthy(
    component: str,
    url: str,
    *,
    alive: Callable[[], bool],
    log_file: Path,
    ssl_ctx: ssl.SSLContext | bool = False,
    timeout: float = 90.0,
) -> None:
    """Poll ``url`` until 200; fail fast if ``alive()`` turns False."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last = (0, "no answer yet")
    while loop.time() < deadline:
        last = await probe(url, ssl_ctx=ssl_ctx)
        if last[0] == 200:
            return
        if not alive():
            raise ComponentFailed(component, "exited while starting", log_tail(log_file))
        await asyncio.sleep(0.3)
    raise ComponentFailed(
        component,
        f"{url} not healthy after {timeout}s; last answer {last[0]}: {last[1]}",
        log_tail(log_file),
    )
