"""Errors of the local cluster tooling; one base class so callers can catch them all."""

from __future__ import annotations


class LocalKubeError(Exception):
    """Base class for localkube failures."""


class CommandFailed(LocalKubeError):
    """An external command (openssl, unshare, a probe) failed."""

    def __init__(self, argv: list[str], returncode: int | None, output: str) -> None:
        super().__init__(f"{argv[0]} exited with {returncode}: {output.strip()[-2000:]}")
        self.argv = argv
        self.returncode = returncode
        self.output = output


class ComponentFailed(LocalKubeError):
    """A control-plane component or node agent did not become healthy."""

    def __init__(self, component: str, reason: str, log_tail: str = "") -> None:
        tail = f"\n--- last lines of its log ---\n{log_tail}" if log_tail else ""
        super().__init__(f"{component}: {reason}{tail}")
        self.component = component
        self.reason = reason
