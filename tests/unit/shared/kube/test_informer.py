"""Informer logic against a scripted list/watch source: sync, events, bookmarks, 410 relist,
dropped watches, backoff, resync, handler and decode failures, indexes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from shared.kube.api_types import ListResult, WatchEventType
from shared.kube.errors import Gone, ServerError, TransportError
from shared.kube.informer import Handlers, Informer, InformerConfig, raw, wait_for_sync
from shared.kube.ratelimit import BackoffPolicy
from shared.kube.store import NAMESPACE_INDEX, NODE_INDEX, OWNER_INDEX
from shared.model import VirtualMachineInstance
from tests.unit.shared.kube.fakes import (
    RecordingSleep,
    ScriptedSource,
    WatchScript,
    bookmark,
    event,
    eventually,
    pod,
)

ADDED, MODIFIED, DELETED = WatchEventType.ADDED, WatchEventType.MODIFIED, WatchEventType.DELETED
Obj = dict[str, Any]


class Recorder:
    """Handlers that record what they were told."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    def handlers(self) -> Handlers[Obj]:
        return Handlers(
            on_add=lambda o: self._rec("add", o),
            on_update=lambda old, new: self._rec("update", new, old),
            on_delete=lambda o: self._rec("delete", o),
        )

    def _rec(self, kind: str, obj: Obj, old: Obj | None = None) -> None:
        rv = obj["metadata"].get("resourceVersion", "")
        if old is not None and old is obj:
            kind = "resync"
        self.seen.append((kind, obj["metadata"]["name"], rv))


def make(
    source: ScriptedSource, *, sleep: Callable[[float], Any] | None = None, **cfg: Any
) -> tuple[Informer[Obj], Recorder]:
    config = InformerConfig(
        name="pods", backoff=BackoffPolicy(initial=1.0, cap=8.0, jitter=0.0), **cfg
    )
    informer = Informer(source, config, decode=raw, sleep=sleep or RecordingSleep())
    recorder = Recorder()
    informer.add_handlers(recorder.handlers())
    return informer, recorder


@contextlib.asynccontextmanager
async def running(informer: Informer[Any]) -> AsyncIterator[None]:
    task = asyncio.create_task(informer.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_initial_list_fills_cache_and_marks_synced() -> None:
    """The first list delivers adds, fills the store and sets has_synced; the watch starts
    from the list's resourceVersion."""
    src = ScriptedSource()
    src.lists.append(ListResult([pod("a", "5"), pod("b", "6")], "10"))
    informer, rec = make(src)
    async with running(informer):
        await wait_for_sync(informer, timeout=5)
        await src.watch_done.wait()
    assert rec.seen == [("add", "a", "5"), ("add", "b", "6")]
    assert sorted(informer.store.keys()) == ["ns/a", "ns/b"]
    assert src.watch_calls == ["10"]


async def test_watch_events_update_cache_and_call_handlers() -> None:
    """ADDED, MODIFIED and DELETED change the store and reach on_add/on_update/on_delete."""
    src = ScriptedSource()
    src.lists.append(ListResult([pod("a", "5")], "10"))
    src.watches.append(
        WatchScript(
            [
                event(ADDED, pod("b", "11")),
                event(MODIFIED, pod("a", "12")),
                event(DELETED, pod("b", "13")),
            ],
            hang=True,
        )
    )
    informer, rec = make(src)
    async with running(informer):
        await src.watch_done.wait()
    assert rec.seen == [
        ("add", "a", "5"),
        ("add", "b", "11"),
        ("update", "a", "12"),
        ("delete", "b", "13"),
    ]
    assert informer.store.keys() == ["ns/a"]
    a = informer.store.get("ns/a")
    assert a is not None and a["metadata"]["resourceVersion"] == "12"


async def test_bookmark_advances_resource_version_silently() -> None:
    """A bookmark calls no handler but the next watch resumes from its resourceVersion."""
    src = ScriptedSource()
    src.lists.append(ListResult([], "10"))
    src.watches.append(WatchScript([bookmark("42")]))  # then the server ends the watch
    informer, rec = make(src)
    async with running(informer):
        await src.watch_done.wait()
    assert rec.seen == []
    assert src.watch_calls == ["10", "42"]
    assert src.list_calls == 1


async def test_gone_triggers_relist_that_delivers_only_differences() -> None:
    """410 Gone → relist: vanished objects are deleted, changed updated, new added,
    unchanged ones not re-delivered; the new watch starts from the new list."""
    src = ScriptedSource()
    src.lists.append(ListResult([pod("keep", "5"), pod("change", "6"), pod("vanish", "7")], "10"))
    src.lists.append(ListResult([pod("keep", "5"), pod("change", "20"), pod("new", "21")], "30"))
    src.watches.append(WatchScript(error=Gone(410, "Expired", "too old resource version")))
    informer, rec = make(src)
    with capture_logs() as logs:
        async with running(informer):
            await src.watch_done.wait()
    assert rec.seen[3:] == [
        ("update", "change", "20"),
        ("add", "new", "21"),
        ("delete", "vanish", "7"),
    ]
    assert sorted(informer.store.keys()) == ["ns/change", "ns/keep", "ns/new"]
    assert src.watch_calls == ["10", "30"]
    assert informer.relists == 2
    assert "informer_resource_version_expired" in [e["event"] for e in logs]


async def test_gone_as_watch_error_event_mid_stream() -> None:
    """Events before a 410 are applied; the relist then reconciles the rest."""
    src = ScriptedSource()
    src.lists.append(ListResult([], "10"))
    src.lists.append(ListResult([pod("a", "15")], "16"))
    src.watches.append(WatchScript([event(ADDED, pod("a", "11"))], error=Gone(410, "Expired", "")))
    informer, rec = make(src)
    async with running(informer):
        await src.watch_done.wait()
    assert rec.seen == [("add", "a", "11"), ("update", "a", "15")]


async def test_dropped_watch_rewatches_from_last_event_without_relist() -> None:
    """A watch that ends after events is re-opened from the last resourceVersion at once."""
    src = ScriptedSource()
    src.lists.append(ListResult([], "10"))
    src.watches.append(WatchScript([event(ADDED, pod("a", "11"))]))
    sleep = RecordingSleep()
    informer, _ = make(src, sleep=sleep)
    async with running(informer):
        await src.watch_done.wait()
    assert src.watch_calls == ["10", "11"]
    assert src.list_calls == 1
    assert sleep.delays == []


async def test_empty_watches_back_off() -> None:
    """Watches that close at once without events are retried with growing delays."""
    src = ScriptedSource()
    src.lists.append(ListResult([], "10"))
    src.watches.extend(WatchScript() for _ in range(4))
    sleep = RecordingSleep()
    informer, _ = make(src, sleep=sleep)
    async with running(informer):
        await src.watch_done.wait()
    assert sleep.delays == [1.0, 2.0, 4.0, 8.0]


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(TransportError("connection reset"), id="transport"),
        pytest.param(ServerError(500, "InternalError", "etcd"), id="server-error"),
    ],
)
async def test_watch_errors_back_off_and_resume_from_same_version(error: Exception) -> None:
    """A broken watch is retried after backoff from the resourceVersion it had reached."""
    src = ScriptedSource()
    src.lists.append(ListResult([], "10"))
    src.watches.append(WatchScript([bookmark("12")], error=error))
    sleep = RecordingSleep()
    informer, _ = make(src, sleep=sleep)
    with capture_logs() as logs:
        async with running(informer):
            await src.watch_done.wait()
    assert src.watch_calls == ["10", "12"]
    assert sleep.delays == [1.0]
    failed = [e for e in logs if e["event"] == "informer_request_failed"]
    assert failed and failed[0]["phase"] == "watch"


async def test_list_failures_back_off_until_list_succeeds() -> None:
    """The informer keeps retrying the list with backoff and syncs once it works."""
    src = ScriptedSource()
    src.lists.extend(
        [TransportError("refused"), TransportError("refused"), ListResult([pod("a", "1")], "2")]
    )
    sleep = RecordingSleep()
    informer, rec = make(src, sleep=sleep)
    async with running(informer):
        await wait_for_sync(informer, timeout=5)
    assert sleep.delays == [1.0, 2.0]
    assert rec.seen == [("add", "a", "1")]


async def test_client_side_timeout_reopens_a_silent_watch() -> None:
    """A watch that outlives timeoutSeconds + slack is abandoned (and closed) and re-opened."""
    src = ScriptedSource()
    src.lists.append(ListResult([], "10"))
    informer, _ = make(src, watch_timeout_seconds=0, watch_slack=0.01)
    with capture_logs() as logs:
        async with running(informer):
            await eventually(lambda: len(src.watch_calls) >= 2, real=True)
    assert src.watch_calls[:2] == ["10", "10"]
    assert src.closed_watches >= 1
    assert "informer_watch_timed_out" in [e["event"] for e in logs]


async def test_resync_redelivers_every_object_as_update() -> None:
    """resync() hands each cached object to on_update as both old and new."""
    src = ScriptedSource()
    src.lists.append(ListResult([pod("a", "1"), pod("b", "2")], "3"))
    informer, rec = make(src)
    async with running(informer):
        await src.watch_done.wait()
        informer.resync()
    assert rec.seen[2:] == [("resync", "a", "1"), ("resync", "b", "2")]


async def test_periodic_resync_runs_on_its_period() -> None:
    """With resync_period set, cached objects are re-delivered without any watch event."""
    src = ScriptedSource()
    src.lists.append(ListResult([pod("a", "1")], "3"))
    config = InformerConfig(name="pods", resync_period=0.01)
    informer = Informer(src, config, decode=raw)
    rec = Recorder()
    informer.add_handlers(rec.handlers())
    async with running(informer):
        await eventually(lambda: ("resync", "a", "1") in rec.seen, real=True)


async def test_failing_handler_is_logged_and_others_still_run() -> None:
    """A handler that raises does not stop the informer or later handlers."""
    src = ScriptedSource()
    src.lists.append(ListResult([pod("a", "1")], "3"))
    src.watches.append(WatchScript([event(ADDED, pod("b", "4"))], hang=True))
    informer = Informer(src, InformerConfig(name="pods"), decode=raw)

    def broken(_: Obj) -> None:
        raise RuntimeError("handler bug")

    informer.add_handlers(Handlers(on_add=broken))
    rec = Recorder()
    informer.add_handlers(rec.handlers())
    with capture_logs() as logs:
        async with running(informer):
            await src.watch_done.wait()
    assert [e["event"] for e in logs].count("informer_handler_failed") == 2
    assert rec.seen == [("add", "a", "1"), ("add", "b", "4")]


async def test_objects_that_do_not_decode_are_skipped() -> None:
    """A malformed object is logged and left out of a typed cache; the rest load."""
    good = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "ok", "namespace": "ns", "resourceVersion": "1"}}  # fmt: skip
    bad = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
           "metadata": {"name": "bad", "namespace": "ns", "resourceVersion": "2"},
           "spec": {"volumes": "not-a-list"}}  # fmt: skip
    src = ScriptedSource()
    src.lists.append(ListResult([good, bad], "3"))
    informer = Informer(src, InformerConfig(name="vmis"), decode=VirtualMachineInstance.from_dict)
    with capture_logs() as logs:
        async with running(informer):
            await src.watch_done.wait()
    assert informer.store.keys() == ["ns/ok"]
    assert [e["key"] for e in logs if e["event"] == "informer_decode_failed"] == ["ns/bad"]


async def test_late_handlers_receive_cached_objects_as_adds() -> None:
    """Handlers registered after sync are told about every cached object."""
    src = ScriptedSource()
    src.lists.append(ListResult([pod("a", "1")], "3"))
    informer, _ = make(src)
    async with running(informer):
        await src.watch_done.wait()
        late = Recorder()
        informer.add_handlers(late.handlers())
    assert late.seen == [("add", "a", "1")]


async def test_indexes_follow_watch_events() -> None:
    """Namespace, node and owner indexes track adds, moves and deletes."""
    src = ScriptedSource()
    src.lists.append(
        ListResult([pod("a", "1", node="n1", owner="u1"), pod("b", "2", namespace="other")], "3")
    )
    moved = pod("a", "4", node="n2", owner="u1", labels={"kubevirt.io/nodeName": "n2"})
    src.watches.append(
        WatchScript(
            [event(MODIFIED, moved), event(DELETED, pod("b", "5", namespace="other"))], hang=True
        )
    )
    informer, _ = make(src)
    async with running(informer):
        await src.watch_done.wait()
    store = informer.store
    assert store.index_keys(NODE_INDEX, "n1") == []
    assert store.index_keys(NODE_INDEX, "n2") == ["ns/a"]
    assert store.index_keys(OWNER_INDEX, "u1") == ["ns/a"]
    assert store.index_keys(NAMESPACE_INDEX, "other") == []
    assert store.index_values(NAMESPACE_INDEX) == ["ns"]


async def test_wait_for_sync_times_out_when_never_listed() -> None:
    """wait_for_sync raises TimeoutError if an informer never completes a list."""
    src = ScriptedSource()
    informer, _ = make(src)
    with pytest.raises(TimeoutError):
        await wait_for_sync(informer, timeout=0.01)


def test_handlers_each_calls_on_every_change() -> None:
    """Handlers.each calls one function with the added, the new updated and the deleted
    object."""
    seen: list[str] = []
    handlers: Handlers[str] = Handlers.each(seen.append)
    assert handlers.on_add and handlers.on_update and handlers.on_delete
    handlers.on_add("a")
    handlers.on_update("old", "b")
    handlers.on_delete("c")
    assert seen == ["a", "b", "c"]
