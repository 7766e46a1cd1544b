"""The device-plugin audit (handler.deviceaudit): a plugin the Node does not advertise,
though registered and Healthy, registers again; API errors, young registrations and
unhealthy devices never count as drops."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from handler.deviceaudit import AdvertisedAudit, AuditConfig, advertised
from handler.deviceplugin import DevicePlugin, DevicePlugins, DevicePluginsConfig
from shared.kube import ServerError
from tests.unit.handler.test_deviceplugin import DEVICES, Rig
from tests.unit.handler.waiting import until

TUN = "devices.kubevirt.io/tun"


@dataclass
class Plugin:
    """A registered plugin as the audit sees it."""

    resource: str = TUN
    healthy: bool = True
    registered_at: float | None = 0.0
    drops: list[str] = field(default_factory=list)

    def drop(self, reason: str) -> None:
        self.drops.append(reason)


@dataclass
class Node:
    """The Node's allocatable as read; `error` makes the next read fail."""

    allocatable: dict[str, str] = field(default_factory=dict)
    error: Exception | None = None
    reads: int = 0

    async def read(self) -> Mapping[str, str]:
        self.reads += 1
        if self.error is not None:
            raise self.error
        return dict(self.allocatable)


def audit_of(plugin: Plugin, node: Node, now: list[float]) -> AdvertisedAudit:
    config = AuditConfig(interval=1.0, grace=30.0, misses=2)
    return AdvertisedAudit([plugin], node.read, config, clock=lambda: now[0])


@pytest.mark.parametrize(
    ("value", "shown"), [(None, False), ("0", False), ("1000", True), ("1k", True)]
)
def test_advertised_counts_only_a_clear_zero_or_absence_as_missing(
    value: str | None, shown: bool
) -> None:
    """0 or no entry is not advertised; a count is; a value that is not a plain integer is
    given the benefit of the doubt."""
    assert advertised(value) is shown


async def test_a_plugin_the_node_does_not_show_is_dropped_after_two_reads() -> None:
    """Registered past the grace and Healthy, but the Node shows 0: the first read is a
    miss, the second drops the plugin (logged with the resource); a shown count resets."""
    plugin, node, now = Plugin(), Node({TUN: "0"}), [100.0]
    audit = audit_of(plugin, node, now)
    with capture_logs() as logs:
        await audit.check()
        assert plugin.drops == []
        await audit.check()
    assert plugin.drops == ["the Node does not advertise it"]
    assert [e["resource"] for e in logs if e["event"] == "device_plugin_not_advertised"] == [TUN]
    node.allocatable[TUN] = "1000"
    await audit.check()
    node.allocatable[TUN] = "0"
    await audit.check()
    assert len(plugin.drops) == 1, "a shown count in between starts the misses again"


@pytest.mark.parametrize(
    ("plugin", "why"),
    [
        (Plugin(registered_at=90.0), "registered within the grace"),
        (Plugin(registered_at=None), "not registered (withdrawn, backing off)"),
        (Plugin(healthy=False), "unhealthy: 0 is right"),
    ],
)
async def test_young_unregistered_or_unhealthy_plugins_are_left_alone(
    plugin: Plugin, why: str
) -> None:
    """The Node may rightly show 0: just after a registration (the kubelet posts status on
    its own period), while no registration is in force, or for an unhealthy device."""
    node, now = Node({}), [100.0]
    audit = audit_of(plugin, node, now)
    for _ in range(3):
        await audit.check()
    assert plugin.drops == [], why


async def test_an_api_error_proves_nothing() -> None:
    """A failed read of the Node skips the round: it neither counts as a miss nor resets."""
    plugin, node, now = Plugin(), Node({TUN: "0"}), [100.0]
    audit = audit_of(plugin, node, now)
    await audit.check()
    node.error = ServerError(500, "InternalError", "etcd leader changed")
    await audit.check()
    node.error = None
    await audit.check()
    assert len(plugin.drops) == 1


async def test_run_stops_when_told() -> None:
    """The audit's loop ends at once when the plugins stop."""
    stop = asyncio.Event()
    audit = audit_of(Plugin(), Node({TUN: "1"}), [0.0])
    task = asyncio.create_task(audit.run(stop))
    stop.set()
    await asyncio.wait_for(task, 1)


def test_drop_marks_a_serving_plugin_lost_once() -> None:
    """A drop sets `lost` (the watch then serves anew and registers again) with its reason;
    a plugin that does not serve ignores it, and a new serving clears the reason."""
    plugin = DevicePlugin(name="tun", path=Path("/dev/net/tun"), count=1)
    plugin.drop("not served yet")
    assert not plugin.lost.is_set()
    plugin.set_serving(True)
    plugin.drop("gone")
    assert plugin.lost.is_set() and plugin.drop_reason == "gone"
    plugin.set_serving(False)
    plugin.set_serving(True)
    assert not plugin.lost.is_set() and plugin.drop_reason is None
    assert plugin.registered_at is None


async def test_the_plugins_register_again_when_the_node_never_shows_them() -> None:
    """End to end with fakes: a kubelet that accepts registrations but whose Node never
    advertises tun gets tun registered again, without a stream-closed log."""
    r = Rig()
    node = Node({"devices.kubevirt.io/kvm": "3"})
    r.plugins = DevicePlugins(
        DevicePluginsConfig(
            directory=r.plugins.config.directory,
            count=3,
            interval=0.02,
            stream_grace=60.0,
            audit=AuditConfig(interval=0.02, grace=0.0, misses=2),
            devices=DEVICES,
        ),
        kubelet=r.kubelet,
        serve=r._serve,
        check=r._check,
        allocatable=node.read,
    )
    with capture_logs() as logs:
        task = asyncio.create_task(r.plugins.run())
        try:
            await until(lambda: r.kubelet.registered(TUN) >= 2, "tun registered again")
        finally:
            await r.plugins.shutdown(5)
            await asyncio.wait_for(task, 5)
    assert r.kubelet.registered("devices.kubevirt.io/kvm") == 1, "kvm is shown: left alone"
    events = [e["event"] for e in logs]
    assert "device_plugin_not_advertised" in events
    assert "device_plugin_stream_closed" not in events
