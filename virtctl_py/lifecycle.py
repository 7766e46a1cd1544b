"""start / stop / restart / migrate: PUTs on KubeVirt's VM subresources, as upstream virtctl.

    PUT /apis/subresources.kubevirt.io/v1/namespaces/<ns>/virtualmachines/<name>/<verb>

The API (virt-controller here, virt-api in KubeVirt) decides the object writes, so the
caller needs `update` on `virtualmachines/<verb>` only (kubevirt.io:edit), never on
`virtualmachines/status`. Bodies are KubeVirt's Start/Stop/Restart/MigrateOptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.kube.resources import SUBRESOURCES_GROUP, Resource

VM_SUBRESOURCES = Resource(SUBRESOURCES_GROUP, "v1", "virtualmachines", "VirtualMachine")
DRY_RUN_ALL = "All"


@dataclass(frozen=True, slots=True, kw_only=True)
class VerbOptions:
    """What the flags ask of a verb."""

    dry_run: bool = False
    paused: bool = False  # start --paused
    grace_period: int | None = None  # stop/restart --grace-period (with --force)


def body(verb: str, opts: VerbOptions) -> dict[str, Any]:
    """The options object of `verb` (StartOptions, StopOptions, RestartOptions, MigrateOptions)."""
    out: dict[str, Any] = {}
    if opts.dry_run:
        out["dryRun"] = [DRY_RUN_ALL]
    if verb == "start" and opts.paused:
        out["paused"] = True
    if verb == "stop" and opts.grace_period is not None:
        out["gracePeriod"] = opts.grace_period
    if verb == "restart" and opts.grace_period is not None:
        out["gracePeriodSeconds"] = opts.grace_period
    return out


def scheduled(verb: str, name: str, *, dry_run: bool) -> str:
    """Upstream virtctl's answer line."""
    prefix = "(dry run) " if dry_run else ""
    return f"{prefix}VM {name} was scheduled to {verb}"
