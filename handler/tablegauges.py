"""The sizes of the handler's per-VMI tables as gauges (kubevirt_py_handler_*): with no
VMI on the node they are all 0, so a leak shows as a size that stays up."""

from __future__ import annotations

from collections.abc import Callable

from shared.kube import Registry


def table_gauges(
    registry: Registry,
    node: str,
    *,
    vmis: Callable[[], int],
    domains: Callable[[], int],
    launchers: Callable[[], int],
) -> None:
    """Register the gauges; each reads its table's size at scrape time."""
    sizes: dict[str, tuple[str, Callable[[], int]]] = {
        "kubevirt_py_handler_vmis_tracked": (
            "VMIs the handler holds reconcile state for.",
            vmis,
        ),
        "kubevirt_py_handler_domains_cached": (
            "Domains in the handler's domain cache.",
            domains,
        ),
        "kubevirt_py_handler_launcher_connections": (
            "Launcher connections the handler keeps open or is opening.",
            launchers,
        ),
    }
    for name, (help_text, size) in sizes.items():
        child = registry.gauge(name, help_text, ("node",)).labels(node)
        child.set_function(_as_float(size))


def _as_float(size: Callable[[], int]) -> Callable[[], float]:
    return lambda: float(size())
