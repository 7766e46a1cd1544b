"""set_link_states: the handler asks the launcher for each interface's link (up or down)
on the running domain (KubeVirt 1.5+'s live `state`); the reply names the interfaces whose
link was changed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from shared.wire.errors import InvalidArgument


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkStatesArgs:
    """Interface name → link up."""

    links: Mapping[str, bool] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        return {"links": dict(self.links)}

    @classmethod
    def from_wire(cls, args: Mapping[str, Any]) -> Self:
        unknown = sorted(set(args) - {"links"})
        if unknown:
            raise InvalidArgument(unknown[0], "unknown argument")
        links = args.get("links")
        if not isinstance(links, Mapping) or not all(
            isinstance(k, str) and isinstance(v, bool) for k, v in links.items()
        ):
            raise InvalidArgument("links", "expected a map of interface name to bool")
        return cls(links=dict(links))
