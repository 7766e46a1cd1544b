"""virt-handler-py configuration: the command line (and NODE_NAME), parsed once.

The paths follow the launcher-pod contract: each launcher serves
`<pods-dir>/<podUID>/volumes/kubernetes.io~empty-dir/sockets/launcher-sock`, and pushes
domain events to `/var/run/kubevirt-py/nodes/<node>/domain-notify.sock` (a hostPath both
sides mount at the same place). The device plugins serve their sockets in the kubelet's
device-plugins dir (`--device-plugins-dir`, empty: no device plugins).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from handler.actions import ActionsConfig
from handler.deviceplugin import DevicePluginsConfig
from handler.errors import StartupError
from handler.mignet import interface_address
from handler.migration_tls import ProxyConfig
from handler.nodelabeller import LabellerConfig
from shared import podlayout

DEFAULT_PODS_DIR = Path("/var/lib/kubelet/pods")
DEFAULT_NOTIFY_ROOT = Path("/var/run/kubevirt-py/nodes")
DEFAULT_DEVICES = ("/dev/kvm", "/dev/net/tun", "/dev/vhost-net", "/dev/vhost-vsock")
DEFAULT_REQUIRED_DEVICES = ("/dev/net/tun",)
DEFAULT_DEVICE_PLUGINS_DIR = "/var/lib/kubelet/device-plugins"


def notify_socket_for(node: str, root: Path = DEFAULT_NOTIFY_ROOT) -> Path:
    """The notify socket of `node`'s handler, as the launcher pod is told to dial it."""
    return root / node / podlayout.NOTIFY_SOCKET_NAME


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    """Intervals and timeouts (seconds); tests shrink them."""

    heartbeat_interval: float = 60.0
    heartbeat_jitter: float = 0.2
    acpi_interval: float = 3.0
    resync_period: float = 300.0
    ping_interval: float = 5.0
    stats_timeout: float = 2.0
    launcher_missing_timeout: float = 30.0
    shutdown_budget: float = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Config:
    node_name: str
    pods_dir: Path
    notify_socket: Path
    kubeconfig: Path | None
    workers: int
    listen_host: str
    listen_port: int
    metrics_cert_dir: Path | None = None  # HTTPS for /metrics /healthz /readyz
    devices: tuple[Path, ...]
    required_devices: tuple[Path, ...]
    log_format: str
    timing: Timing
    actions: ActionsConfig | None = None  # None: no certificates, no actions endpoint
    # None: no certificates, no migration proxy (only one-host migrations work)
    migration_proxy: ProxyConfig | None = None
    device_plugins: DevicePluginsConfig | None = None  # None: no device plugins served
    # Where the KubeVirt CR lives (read live: migration limits; shared/clusterconfig.py).
    kubevirt_namespace: str = "kubevirt"
    # The kubelet's seccomp dir, where KubeVirt's launcher profile is installed when the
    # KubeVirt CR asks, and passt VMIs' always (handler/seccomp.py); None: never installed.
    seccomp_dir: Path | None = None
    # The node labeller's CPU documents (handler/nodelabeller.py); None: no labelling.
    node_labeller: LabellerConfig | None = None

    @classmethod
    def from_args(
        cls, argv: Sequence[str] | None = None, *, environ: Mapping[str, str] | None = None
    ) -> Self:
        env = os.environ if environ is None else environ
        ns = _parser(env).parse_args(argv)
        if not ns.node_name:
            raise StartupError("--node-name (or NODE_NAME) is required")
        if ns.workers < 1:
            raise StartupError("--workers must be at least 1")
        timing = Timing(
            heartbeat_interval=ns.heartbeat_interval,
            acpi_interval=ns.acpi_interval,
            resync_period=ns.resync_period,
            ping_interval=ns.ping_interval,
            stats_timeout=ns.stats_timeout,
            launcher_missing_timeout=ns.launcher_missing_timeout,
        )
        if not 0 < timing.acpi_interval <= 5:
            raise StartupError("--acpi-interval must be in (0, 5] seconds")
        return cls(
            node_name=ns.node_name,
            pods_dir=ns.pods_dir,
            notify_socket=ns.notify_socket or notify_socket_for(ns.node_name),
            kubeconfig=ns.kubeconfig,
            workers=ns.workers,
            listen_host=ns.listen_host,
            listen_port=ns.listen_port,
            metrics_cert_dir=ns.metrics_cert_dir,
            devices=tuple(Path(d) for d in (ns.device or DEFAULT_DEVICES)),
            required_devices=tuple(
                Path(d) for d in (ns.required_device or DEFAULT_REQUIRED_DEVICES)
            ),
            log_format=ns.log_format,
            timing=timing,
            actions=ActionsConfig.from_env(env),
            migration_proxy=ProxyConfig.from_env(env, migration_network=interface_address),
            device_plugins=_device_plugins(ns),
            kubevirt_namespace=ns.kubevirt_namespace,
            seccomp_dir=Path(ns.seccomp_dir) if ns.seccomp_dir else None,
            node_labeller=_labeller(ns),
        )


def _parser(env: Mapping[str, str]) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="virt-handler-py", description="The node's VMI agent.")
    p.add_argument("--node-name", default=env.get("NODE_NAME", ""), help="this node (NODE_NAME)")
    p.add_argument("--pods-dir", type=Path, default=DEFAULT_PODS_DIR, help="kubelet pods dir")
    p.add_argument(
        "--notify-socket", type=Path, help="default: " + str(notify_socket_for("<node>"))
    )
    p.add_argument("--kubeconfig", type=Path, default=_env_path(env, "KUBECONFIG"))
    p.add_argument("--workers", type=int, default=10, help="VMI reconcile workers")
    p.add_argument("--listen-host", default="0.0.0.0", help="/metrics, /healthz, /readyz")
    p.add_argument("--listen-port", type=int, default=8443)
    p.add_argument(
        "--metrics-cert-dir",
        type=Path,
        default=_env_path(env, "VIRT_HANDLER_METRICS_CERT_DIR"),
        help="tls.crt + tls.key: serve /metrics, /healthz, /readyz over HTTPS",
    )
    p.add_argument("--device", action="append", help="a device to check (repeatable)")
    p.add_argument("--required-device", action="append", help="unschedulable without it")
    p.add_argument(
        "--device-plugins-dir",
        default=DEFAULT_DEVICE_PLUGINS_DIR,
        help="the kubelet's device-plugin sockets dir; empty: serve no device plugins",
    )
    p.add_argument(
        "--seccomp-dir",
        default="",
        help="the kubelet's seccomp dir (<root-dir>/seccomp); empty: install no profile",
    )
    p.add_argument(
        "--node-labeller-dir",
        default="",
        help="the qemu-capabilities init container's CPU documents; empty: no node labels",
    )
    p.add_argument("--node-labeller-interval", type=float, default=180.0)
    p.add_argument("--devices-per-resource", type=int, default=1000, help="guests per device")
    p.add_argument("--device-check-interval", type=float, default=5.0)
    p.add_argument("--heartbeat-interval", type=float, default=60.0)
    p.add_argument("--acpi-interval", type=float, default=3.0, help="ACPI re-send, ≤ 5 s")
    p.add_argument("--resync-period", type=float, default=300.0)
    p.add_argument("--ping-interval", type=float, default=5.0, help="launcher liveness ping")
    p.add_argument("--stats-timeout", type=float, default=2.0, help="per launcher, per scrape")
    p.add_argument("--launcher-missing-timeout", type=float, default=30.0)
    p.add_argument("--log-format", choices=["json", "console"], default="json")
    p.add_argument(
        "--kubevirt-namespace",
        default=env.get("POD_NAMESPACE") or "kubevirt",
        help="namespace of the KubeVirt CR (POD_NAMESPACE)",
    )
    return p


def _device_plugins(ns: argparse.Namespace) -> DevicePluginsConfig | None:
    if not ns.device_plugins_dir:
        return None
    if ns.devices_per_resource < 1 or ns.device_check_interval <= 0:
        raise StartupError("--devices-per-resource and --device-check-interval must be > 0")
    return DevicePluginsConfig(
        directory=Path(ns.device_plugins_dir),
        count=ns.devices_per_resource,
        interval=ns.device_check_interval,
    )


def _labeller(ns: argparse.Namespace) -> LabellerConfig | None:
    if not ns.node_labeller_dir:
        return None
    if ns.node_labeller_interval <= 0:
        raise StartupError("--node-labeller-interval must be > 0")
    return LabellerConfig(directory=Path(ns.node_labeller_dir), interval=ns.node_labeller_interval)


def _env_path(env: Mapping[str, str], name: str) -> Path | None:
    value = env.get(name)
    return Path(value) if value else None
