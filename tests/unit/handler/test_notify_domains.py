"""The notify server and the domain cache it feeds."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from handler.domains import DomainCache
from handler.notify import NotifyServer
from shared.wire.client import RpcClient, Tier
from shared.wire.domain import DomainEvent, DomainState, EventType
from shared.wire.errors import InvalidArgument
from shared.wire.launcher_api import NOTIFY_METHOD
from tests.unit.handler.fakes import domain_status, vmi_dict


def test_events_update_the_cache_and_announce_the_vmi() -> None:
    """An event stores the domain by VMI uid and enqueues ns/name; a repeat is silent."""
    changes: list[str] = []
    cache = DomainCache(on_change=changes.append)
    raw = vmi_dict(name="a")
    status = domain_status(raw)
    cache.apply_event(DomainEvent(type=EventType.MODIFIED, domain=status, reason="Started"))
    cache.apply_event(DomainEvent(type=EventType.MODIFIED, domain=status, reason="Resumed"))
    record = cache.get(raw["metadata"]["uid"])
    assert record is not None and record.status == status
    assert changes == ["default/a"]


def test_a_reply_older_than_an_event_is_dropped() -> None:
    """A command reply taken before an event arrived must not overwrite that event."""
    cache = DomainCache(on_change=lambda _: None)
    raw = vmi_dict()
    uid = raw["metadata"]["uid"]
    since = cache.generation(uid)
    off = domain_status(raw, DomainState.SHUTOFF, "Shutdown")
    cache.apply_event(DomainEvent(type=EventType.MODIFIED, domain=off, reason="Stopped"))
    assert not cache.apply_reply(domain_status(raw), since=since)
    record = cache.get(uid)
    assert record is not None and record.status.state is DomainState.SHUTOFF
    assert cache.apply_reply(domain_status(raw), since=cache.generation(uid))


def test_deleted_event_marks_the_domain_off() -> None:
    """Deleted: the record stays (the VMI decides what it means) but is off."""
    cache = DomainCache(on_change=lambda _: None)
    raw = vmi_dict()
    cache.apply_event(
        DomainEvent(type=EventType.DELETED, domain=domain_status(raw), reason="Undefined")
    )
    record = cache.get(raw["metadata"]["uid"])
    assert record is not None and record.deleted and record.is_off


async def test_notify_server_accepts_launcher_events(tmp_path: Path) -> None:
    """A launcher's domain_event over the socket lands in the cache; garbage is refused."""
    changes: list[str] = []
    cache = DomainCache(on_change=changes.append)
    path = tmp_path / "nodes" / "node01" / "domain-notify.sock"
    server = NotifyServer(path, cache)
    started = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(server.serve(started=started))
        await started.wait()
        raw = vmi_dict()
        event = DomainEvent(type=EventType.ADDED, domain=domain_status(raw), reason="Defined")
        async with RpcClient.connect(path) as client:
            await client.call(NOTIFY_METHOD, event.to_wire(), tier=Tier.SHORT)
            with pytest.raises(InvalidArgument):
                await client.call(NOTIFY_METHOD, {"type": "Exploded"}, tier=Tier.SHORT)
        task.cancel()
    assert cache.get(raw["metadata"]["uid"]) is not None
    assert changes == ["default/tiny"]
    assert not path.exists()
