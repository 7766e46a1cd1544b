"""The launcher pod's part of network binding plugins (shared/netbinding.py): each used
plugin's `computeResourceOverhead` on the compute container, as KubeVirt's template adds
it (the NADs go into the multus annotation: netbinding.pod_networks)."""

from __future__ import annotations

from collections.abc import Sequence

from shared import nics
from shared.model import VirtualMachineInstance
from shared.model.quantity import parse_bytes, parse_millis
from shared.netbinding import BindingPlugin, Overhead, plugin_of


def overhead(plugins: Sequence[BindingPlugin], vmi: VirtualMachineInstance) -> Overhead:
    """The sum of the overheads of the plugins the VMI's interfaces use (once per use)."""
    used = [p for i in nics.present(vmi) if (p := plugin_of(plugins, i)) is not None]
    return Overhead(
        request_memory=sum(p.overhead.request_memory for p in used),
        request_cpu_millis=sum(p.overhead.request_cpu_millis for p in used),
        limit_memory=sum(p.overhead.limit_memory for p in used),
        limit_cpu_millis=sum(p.overhead.limit_cpu_millis for p in used),
    )


def _add(values: dict[str, str], key: str, amount: int, *, cpu: bool) -> None:
    if not amount or key not in values:
        return
    if cpu:
        values[key] = f"{parse_millis(values[key]) + amount}m"
    else:
        values[key] = str(parse_bytes(values[key]) + amount)


def add_overhead(
    resources: dict[str, dict[str, str]],
    plugins: Sequence[BindingPlugin],
    vmi: VirtualMachineInstance,
) -> dict[str, dict[str, str]]:
    """`resources` (the compute container's) with the plugins' overhead: requests always,
    limits where the container has that limit."""
    extra = overhead(plugins, vmi)
    requests, limits = dict(resources["requests"]), dict(resources["limits"])
    requests.setdefault("memory", "0")
    _add(requests, "memory", extra.request_memory, cpu=False)
    if extra.request_cpu_millis:
        requests.setdefault("cpu", "0m")
        _add(requests, "cpu", extra.request_cpu_millis, cpu=True)
    _add(limits, "memory", extra.limit_memory, cpu=False)
    _add(limits, "cpu", extra.limit_cpu_millis, cpu=True)
    return {**resources, "requests": requests, "limits": limits}
