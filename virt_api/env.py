"""virt-api's environment variables, each under its part's prefix
(VIRT_CONTROLLER_ADMISSION_, VIRT_CONTROLLER_SUBRESOURCES_)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PrefixedEnv:
    """The variables of one part: `get("PORT", …)` reads `<prefix>PORT`."""

    environ: Mapping[str, str]
    prefix: str

    def get(self, name: str, default: str) -> str:
        """The variable's value; `default` when unset or empty."""
        return self.environ.get(self.prefix + name) or default

    def port(self, default: int, *, error: type[Exception]) -> int:
        """PORT as a number; `error` naming the variable when it is not one."""
        try:
            return int(self.get("PORT", str(default)))
        except ValueError as e:
            raise error(f"{self.prefix}PORT is not a number") from e
