"""Who and where: kubectl's kubeconfig rules and connection flags, turned into a client.

    with resolved(flags, environ=os.environ, home=Path.home()) as target:
        kube = await target.connect()

When the kubeconfig cannot be used as read (several KUBECONFIG paths, --server, --token,
--insecure-skip-tls-verify, --cluster, --user), the merged and overridden config is written
to a private temporary file (0600) for the life of the command and removed afterwards.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from virtctl_py import kubeconfig
from virtctl_py.errors import CliError, Exit

if TYPE_CHECKING:
    from shared.kube import ClientConfig, KubeClient

DEFAULT_REQUEST_TIMEOUT = 30.0
NO_TIMEOUT = 3600.0  # kubectl's "0" (none): an hour still bounds every await
DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    kubeconfig: Path
    context: str | None
    namespace: str
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    headers: tuple[tuple[str, str], ...] = ()

    def client_config(self) -> ClientConfig:
        # The full client (aiohttp, metrics) loads only for verbs that connect with it.
        from shared.kube import ClientConfig  # noqa: PLC0415
        from shared.kube.ratelimit import RateLimit  # noqa: PLC0415

        return ClientConfig(
            kubeconfig=self.kubeconfig,
            context=self.context,
            rate_limit=RateLimit(qps=50, burst=100),
            user_agent="virtctl-py",
            request_timeout=self.request_timeout,
            headers=self.headers,
        )

    async def connect(self) -> KubeClient:
        from shared.kube import KubeClient, Registry  # noqa: PLC0415

        return await KubeClient.connect(self.client_config(), registry=Registry())


def request_timeout(text: str | None) -> float:
    """kubectl's --request-timeout: "30", "30s", "2m", "500ms"; "0" means no timeout."""
    if text is None:
        return DEFAULT_REQUEST_TIMEOUT
    match = DURATION.match(text.strip())
    if match is None:
        raise CliError(
            f"invalid --request-timeout {text!r}: use a number with an optional unit "
            "(ms, s, m, h), e.g. 30s",
            code=Exit.USAGE,
        )
    seconds = float(match.group(1)) * UNITS[match.group(2)]
    return seconds if seconds > 0 else NO_TIMEOUT


@contextlib.contextmanager
def resolved(
    flags: kubeconfig.Overrides,
    *,
    kubeconfig_flag: str | None,
    timeout: str | None = None,
    environ: Mapping[str, str],
    home: Path,
) -> Iterator[Target]:
    """The Target of the flags; a synthesized kubeconfig lives until the block ends."""
    paths = kubeconfig.kubeconfig_paths(kubeconfig_flag, environ, home)
    loaded = [c for c in (kubeconfig.load(p) for p in paths) if c is not None]
    if kubeconfig_flag and not loaded:
        raise CliError(f"kubeconfig {kubeconfig_flag} does not exist", code=Exit.USAGE)
    merged = kubeconfig.merge(loaded)
    headers = kubeconfig.impersonation(merged, flags.context, flags)
    seconds = request_timeout(timeout)
    if len(loaded) == 1 and len(paths) == 1 and not flags.connection_changed:
        yield Target(
            kubeconfig=paths[0],
            context=flags.context,
            namespace=flags.namespace or kubeconfig.namespace_of(merged, flags.context),
            request_timeout=seconds,
            headers=headers,
        )
        return
    import tempfile  # noqa: PLC0415 - only a merged or overridden kubeconfig needs a file

    final = kubeconfig.override(merged, flags)
    with tempfile.TemporaryDirectory(prefix="virtctl-py-") as tmp:
        path = Path(tmp) / "kubeconfig"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            yaml.safe_dump(final, out)
        yield Target(
            kubeconfig=path,
            context=None,
            namespace=kubeconfig.namespace_of(final, None),
            request_timeout=seconds,
            headers=headers,
        )
