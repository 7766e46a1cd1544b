"""The device plugins checked end to end: does our Node advertise what we registered?

A plugin learns of most drops from its own side (kubelet.sock recreated, our socket gone,
the kubelet's ListAndWatch stream closed or never opened; handler.deviceplugin). One drop
it cannot see: the kubelet forgot the plugin while the plugin's end of the stream stayed
open. Pods requesting the resource then stay Pending ("Insufficient
devices.kubevirt.io/tun") for as long as the handler runs. So every `interval` the audit
reads the Node's `status.allocatable`; a plugin registered for at least `grace`, Healthy,
whose resource the Node shows as 0 (or not at all) on `misses` reads in a row is dropped
(`device_plugin_not_advertised`) and registers again. The kubelet posts capacity changes
with its node status (every 10 s by default), so `grace` must exceed that period.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from shared.kube import KubeError

log = structlog.get_logger("handler.deviceaudit")

Allocatable = Callable[[], Awaitable[Mapping[str, str]]]


class Audited(Protocol):
    """What the audit needs of a plugin (handler.deviceplugin.DevicePlugin)."""

    @property
    def resource(self) -> str: ...

    @property
    def healthy(self) -> bool: ...

    @property
    def registered_at(self) -> float | None: ...

    def drop(self, reason: str) -> None:
        """Serve anew and register again, saying why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditConfig:
    """How often the Node is read, and what counts as not advertised."""

    interval: float = 30.0
    grace: float = 30.0  # since the registration: longer than the kubelet's status period
    misses: int = 2  # reads in a row showing 0
    timeout: float = 10.0


def advertised(value: str | None) -> bool:
    """The Node's allocatable for a resource shows devices (an unparsable value counts as
    shown: only a clear 0, or no entry, is a drop)."""
    if value is None:
        return False
    try:
        return int(value) > 0
    except ValueError:
        return True


class AdvertisedAudit:
    """Reads the Node's allocatable and drops plugins it does not show."""

    def __init__(
        self,
        plugins: Sequence[Audited],
        allocatable: Allocatable,
        config: AuditConfig,
        *,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._plugins = plugins
        self._allocatable = allocatable
        self.config = config
        self._clock = clock or asyncio.get_running_loop().time
        self._misses: dict[str, int] = {}
        self.drops = 0

    async def run(self, stop: asyncio.Event) -> None:
        """Check every `interval` until `stop` is set."""
        while not stop.is_set():
            try:
                async with asyncio.timeout(self.config.interval):
                    await stop.wait()
                return
            except TimeoutError:
                pass
            await self.check()

    async def check(self) -> None:
        """One read of the Node; an API error skips the round (it proves nothing)."""
        try:
            async with asyncio.timeout(self.config.timeout):
                shown = await self._allocatable()
        except (KubeError, OSError, TimeoutError) as exc:
            if (task := asyncio.current_task()) is not None and task.cancelling():
                raise
            log.info("device_audit_skipped", error=str(exc))
            return
        now = self._clock()
        for plugin in self._plugins:
            at = plugin.registered_at
            settled = at is not None and now - at >= self.config.grace
            if not settled or not plugin.healthy or advertised(shown.get(plugin.resource)):
                self._misses.pop(plugin.resource, None)
                continue
            misses = self._misses.get(plugin.resource, 0) + 1
            self._misses[plugin.resource] = misses
            if misses >= self.config.misses:
                del self._misses[plugin.resource]
                self.drops += 1
                log.warning(
                    "device_plugin_not_advertised",
                    resource=plugin.resource,
                    allocatable=shown.get(plugin.resource),
                    reads=misses,
                )
                plugin.drop("the Node does not advertise it")
