"""Per-VMI state in the handler does not outlive its VMI: after VMIs are started, stopped
and deleted on the in-process daemon (stand-in launchers on real sockets), every table the
handler's object graph reaches is back to its size before them (issue 27: each handler's
RSS crept ~0.06 MiB/min in a soak)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from handler.daemon import Handler
from handler.launchers import launcher_socket
from shared.kube import EventRecorder, RecorderConfig, Registry
from shared.model import VMIPhase
from shared.wire.client import RpcClient, Tier
from shared.wire.domain import DomainEvent, DomainState, DomainStatus, EventType
from shared.wire.launcher_api import NOTIFY_METHOD, Method
from tests.unit.handler.fakes import FakeApi, FakeLauncher, vmi_dict
from tests.unit.handler.test_daemon import _config, _get, stand_in_launcher
from tests.unit.handler.waiting import until
from tests.unit.leakcheck import grown, sizes

CYCLES = 4


async def _lifecycle(handler: Handler, api: FakeApi, i: int, *, late_event: bool) -> None:
    """One VMI: Running (and scraped), deleted, stopped, its launcher deleted, the object
    removed; with `late_event` the launcher's last domain event lands after that."""
    name, pod = f"vm{i}", f"pod-{i}"
    key = f"default/{name}"
    fake = FakeLauncher()
    api.put_vmi(vmi_dict(name=name, pod_uid=pod))
    sockets = launcher_socket(handler.config.pods_dir, pod).parent
    async with stand_in_launcher(sockets, fake):
        await until(lambda: api.vmi(key).status.phase is VMIPhase.RUNNING, "Running")
        assert (await _get(handler.http.bound_port, "/metrics"))[0] == 200
        assert handler.stats.vmis() == [key]
        domain = fake.domain
        assert domain is not None
        api.delete_vmi(key)
        await until(lambda: api.vmi(key).status.phase is VMIPhase.SUCCEEDED, "Succeeded")
        await until(lambda: Method.DELETE in fake.calls, "launcher deleted")
        if not late_event:
            await _push(handler, _undefined(domain))
        api.delete_vmi(key, finalized=True)
        await until(lambda: key not in handler.reconciler.uids(), "VMI forgotten")
        if late_event:
            await _push(handler, _undefined(domain))
        await until(lambda: handler.domains.get(domain.vmi_uid) is None, "domain forgotten")
    await until(lambda: len(handler.queue) == 0, "queue drained")
    assert (await _get(handler.http.bound_port, "/metrics"))[0] == 200
    assert handler.recorder is not None
    await handler.recorder.drain()
    api.calls.clear()


def _undefined(domain: DomainStatus) -> DomainStatus:
    return dataclasses.replace(domain, state=DomainState.SHUTOFF, reason="Destroyed")


async def _push(handler: Handler, domain: DomainStatus) -> None:
    """The launcher's notify call, as it makes it when its domain is undefined."""
    event = DomainEvent(type=EventType.DELETED, domain=domain, reason="Undefined")
    async with RpcClient.connect(handler.config.notify_socket) as client:
        await client.call(NOTIFY_METHOD, event.to_wire(), tier=Tier.SHORT)


async def _churn(tmp_path: Path, *, late_event: bool) -> dict[str, tuple[int, int]]:
    config, api = _config(tmp_path), FakeApi()
    registry = Registry()
    recorder = EventRecorder(api, RecorderConfig(component="virt-handler"), registry=registry)
    handler = Handler(config, api=api, registry=registry, recorder=recorder)
    stop = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        tg.create_task(handler.run(stop))
        try:
            await until(handler.ready, "handler ready")
            await _lifecycle(handler, api, 0, late_event=late_event)
            before = sizes(handler, skip=(FakeApi,))
            for i in range(1, CYCLES + 1):
                await _lifecycle(handler, api, i, late_event=late_event)
            after = sizes(handler, skip=(FakeApi,))
        finally:
            stop.set()
    # Delayed requeues (ACPI, guest-info retries) fire on their own: transient, not kept.
    return {p: n for p, n in grown(before, after).items() if not p.endswith("._waiting")}


async def test_vmi_churn_leaves_no_per_vmi_state(tmp_path: Path) -> None:
    """Five VMIs through the handler: no reconcile state, domain record, launcher
    connection, backoff, stats series or event table is kept for any of them."""
    assert await _churn(tmp_path, late_event=False) == {}


async def test_a_domain_event_after_the_vmi_is_gone_is_not_kept(tmp_path: Path) -> None:
    """The launcher's last event arriving after the VMI was forgotten leaves no record."""
    assert await _churn(tmp_path, late_event=True) == {}
