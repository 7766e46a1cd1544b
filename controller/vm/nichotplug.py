"""A running VM's NIC hotplug, unplug and NetworkAttachmentDefinition swap (pure): what of
the template's interfaces and networks reaches the running VMI live (KubeVirt ≥ 1.4, with
`vmRolloutStrategy: LiveUpdate`; the NAD swap is KubeVirt 1.8's).

- an interface added to the template, bridge-bound on a multus network, with its network:
  appended to the VMI's interfaces and networks;
- such an interface set to `state: absent`: the VMI's gets `absent` (virt-handler has the
  launcher detach it; it stays in the VMI's spec so the taps of the others keep their
  index);
- such an interface's network pointed at another NAD (`multus.networkName`): the VMI's
  network follows.
The VMI's launcher pod then lacks (or has one too many, or the wrong) multus attachment:
the workload updater migrates the VMI to a pod whose annotation matches
(controller/workload/logic.py), virt-handler wires the target pod and has its launcher
attach the new NIC (docs/network.md). Anything else about interfaces and networks — a
change of an existing interface, one inserted before others, one unplugged and plugged
again, a pod-network interface — needs a restart, as before.

A VMI made from the template leaves out interfaces marked absent (and their networks),
and comparing the template with the running VMI ignores them once the VMI lacks them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shared.model.devopts import LinkState

ABSENT = str(LinkState.ABSENT)


def _interfaces(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(((spec.get("domain") or {}).get("devices") or {}).get("interfaces") or [])


def _hot(iface: Mapping[str, Any], net: Mapping[str, Any] | None) -> bool:
    multus = net.get("multus") if net is not None else None
    return "bridge" in iface and isinstance(multus, Mapping) and not multus.get("default")


def _within(template: Any, running: Any) -> bool:
    """Every value the template sets is the running one's (lists position by position)."""
    if isinstance(template, Mapping):
        return isinstance(running, Mapping) and all(
            _within(v, running.get(k)) for k, v in template.items()
        )
    if isinstance(template, list):
        return (
            isinstance(running, list)
            and len(running) == len(template)
            and all(_within(t, r) for t, r in zip(template, running, strict=True))
        )
    return bool(template == running)


@dataclass(frozen=True, slots=True, kw_only=True)
class NicChange:
    """The template and the running spec to compare (raw), and the VMI patch."""

    template: dict[str, Any]  # without absent interfaces the VMI no longer has
    running: dict[str, Any]  # with the live NIC changes applied
    ops: list[dict[str, Any]] = field(default_factory=list)


def without_absent(spec: Mapping[str, Any], *, keep: Sequence[str] = ()) -> dict[str, Any]:
    """`spec` (a copy) without its interfaces marked absent and their networks, except
    those named in `keep`."""
    out = copy.deepcopy(dict(spec))
    ifaces = _interfaces(out)
    gone = {i.get("name") for i in ifaces if i.get("state") == ABSENT} - set(keep)
    if not gone:
        return out
    out["domain"]["devices"]["interfaces"] = [i for i in ifaces if i.get("name") not in gone]
    if "networks" in out:
        out["networks"] = [n for n in out["networks"] if n.get("name") not in gone]
    return out


def plan_nics(template_spec: Mapping[str, Any], running_spec: Mapping[str, Any]) -> NicChange:
    """The NIC changes that reach the running VMI live (LiveUpdate)."""
    keep = [str(i.get("name")) for i in _interfaces(running_spec)]
    template = without_absent(template_spec, keep=keep)
    unplugged = {i.get("name") for i in _interfaces(running_spec) if i.get("state") == ABSENT}
    for iface in _interfaces(template):  # asked back (state unset): a restart brings it
        if iface.get("name") in unplugged:
            iface.setdefault("state", str(LinkState.UP))
    unchanged = NicChange(template=template, running=dict(running_spec))
    running = copy.deepcopy(dict(running_spec))
    ifaces, nets = _interfaces(running), list(running.get("networks") or [])
    if not _apply(template, ifaces, nets):
        return unchanged
    if not _within(_interfaces(template), ifaces) or not _within(
        template.get("networks") or [], nets
    ):
        return unchanged  # not only hot changes: a restart brings them
    ops = _list_ops(running_spec, "/spec/domain/devices/interfaces", _interfaces(running_spec),
                    ifaces)  # fmt: skip
    ops += _list_ops(running_spec, "/spec/networks", running_spec.get("networks"), nets)
    running.setdefault("domain", {}).setdefault("devices", {})["interfaces"] = ifaces
    running["networks"] = nets
    return NicChange(template=template, running=running, ops=ops)


def _apply(
    template: Mapping[str, Any], ifaces: list[dict[str, Any]], nets: list[dict[str, Any]]
) -> bool:
    """Apply the template's hot changes to the VMI's lists (in place); whether any."""
    want_net = {n.get("name"): n for n in template.get("networks") or []}
    have_if = {i.get("name"): i for i in ifaces}
    have_net = {n.get("name"): n for n in nets}
    changed = False
    for want in _interfaces(template):
        name = want.get("name")
        net = want_net.get(name)
        if net is None or not _hot(want, net):
            continue
        have = have_if.get(name)
        if have is None:
            if want.get("state") != ABSENT and name not in have_net:
                ifaces.append(copy.deepcopy(want))
                nets.append(copy.deepcopy(net))
                changed = True
            continue
        if have.get("state") == ABSENT:
            continue  # unplugged: plugging it again needs a restart
        if want.get("state") == ABSENT:
            have["state"] = ABSENT
            changed = True
        running_net = have_net.get(name)
        nad = net["multus"].get("networkName")
        swap = running_net is not None and _hot(have, running_net)
        if swap and running_net is not None and running_net["multus"].get("networkName") != nad:
            running_net["multus"] = {**running_net["multus"], "networkName": nad}
            changed = True
    return changed


def _list_ops(
    running: Mapping[str, Any], path: str, old: Any, new: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Replace the list at `path` (tested first, so a VMI changed meanwhile conflicts)."""
    if old == new:
        return []
    if old is None:
        return [{"op": "add", "path": path, "value": new}]
    return [
        {"op": "test", "path": path, "value": old},
        {"op": "replace", "path": path, "value": new},
    ]
