"""devices.downwardMetrics: a virtio-serial port (org.github.vhostmd.1) through which the
guest reads its node's and its own metrics in vhostmd's XML (vm-dump-metrics), answered by
the handler (handler/downwardmetrics.py). KubeVirt's device has no fields."""

from __future__ import annotations

from dataclasses import dataclass

from shared.model._codec import Model


@dataclass(frozen=True, slots=True, kw_only=True)
class DownwardMetricsDevice(Model):
    """devices.downwardMetrics: `{}`."""
