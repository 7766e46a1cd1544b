"""Informers against the real API server: list + watch of real Pods, and a relist after a
watch resumes from a resourceVersion etcd has compacted (410 Gone)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from structlog.testing import capture_logs

from localkube.cluster import Cluster
from shared.kube import (
    PODS,
    DeleteOptions,
    Handlers,
    Informer,
    InformerConfig,
    KubeClient,
    ListWatch,
    Selector,
    raw,
    wait_for_sync,
)
from shared.kube.api_types import ListResult, WatchEvent
from shared.kube.ratelimit import BackoffPolicy
from shared.kube.resources import Resource
from shared.kube.store import NODE_INDEX

pytestmark = pytest.mark.cluster
PODTEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate")
Obj = dict[str, Any]


class Seen:
    """Records handler calls as (kind, name, labels) and wakes waiters."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, str]]] = []
        self.changed = asyncio.Event()

    def handlers(self) -> Handlers[Obj]:
        return Handlers(
            on_add=lambda o: self._rec("add", o),
            on_update=lambda _, o: self._rec("update", o),
            on_delete=lambda o: self._rec("delete", o),
        )

    def _rec(self, kind: str, obj: Obj) -> None:
        meta = obj["metadata"]
        self.events.append((kind, meta["name"], dict(meta.get("labels") or {})))
        self.changed.set()

    async def until(self, cond: Callable[[], bool], timeout: float = 60) -> None:
        async with asyncio.timeout(timeout):
            while not cond():
                self.changed.clear()
                await self.changed.wait()


@contextlib.asynccontextmanager
async def running(informer: Informer[Any]) -> AsyncIterator[None]:
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(informer.run())
        try:
            yield
        finally:
            task.cancel()


def sleeper_pod(name: str, labels: dict[str, str]) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "sleep", "image": "kubevirt-py/sleeper"}],
        },
    }


async def test_informer_sees_real_pod_add_update_delete(kube: KubeClient, namespace: str) -> None:
    """An informer with a label selector lists and watches real Pods: it sees the pod
    added, updated (scheduled onto a node, relabelled) and deleted, never sees pods the
    selector excludes, and indexes the pod by its node."""
    await kube.create(PODS, sleeper_pod("before", {"app": "inf"}), namespace=namespace)
    source = ListWatch(kube, PODS, Selector(namespace=namespace, labels="app=inf"))
    informer = Informer(source, InformerConfig(name="pods"), decode=raw)
    seen = Seen()
    informer.add_handlers(seen.handlers())
    async with running(informer):
        await wait_for_sync(informer, timeout=30)
        assert ("add", "before", {"app": "inf"}) in seen.events

        await kube.create(PODS, sleeper_pod("other", {"app": "not-inf"}), namespace=namespace)
        await kube.create(PODS, sleeper_pod("p", {"app": "inf"}), namespace=namespace)
        await seen.until(lambda: ("add", "p", {"app": "inf"}) in seen.events)

        def scheduled() -> bool:
            pod = informer.store.get(f"{namespace}/p")
            return bool(pod and (pod.get("spec") or {}).get("nodeName"))

        await seen.until(scheduled)
        pod = informer.store.get(f"{namespace}/p")
        assert pod is not None
        node = pod["spec"]["nodeName"]
        assert f"{namespace}/p" in informer.store.index_keys(NODE_INDEX, node)

        await kube.patch(PODS, "p", {"metadata": {"labels": {"step": "2"}}}, namespace=namespace)
        await seen.until(lambda: ("update", "p", {"app": "inf", "step": "2"}) in seen.events)

        await kube.delete(
            PODS, "p", namespace=namespace, options=DeleteOptions(grace_period_seconds=0)
        )
        await seen.until(lambda: any(k == "delete" and n == "p" for k, n, _ in seen.events))
    assert all(name != "other" for _, name, _ in seen.events)
    assert f"{namespace}/p" not in informer.store
    assert informer.relists == 1


class GatedSource:
    """A ListWatch whose next watch can be held back, to make the informer fall behind."""

    def __init__(self, inner: ListWatch) -> None:
        self.inner = inner
        self.open = asyncio.Event()
        self.open.set()
        self.parked = asyncio.Event()

    async def list(self) -> ListResult:
        return await self.inner.list()

    async def watch(
        self, *, resource_version: str, timeout_seconds: int
    ) -> AsyncGenerator[WatchEvent, None]:
        if not self.open.is_set():
            self.parked.set()
            await self.open.wait()
        stream = self.inner.watch(
            resource_version=resource_version, timeout_seconds=timeout_seconds
        )
        async with contextlib.aclosing(stream):
            async for event in stream:
                yield event


def template(name: str, step: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "labels": {"step": step}},
        "template": {"spec": {"containers": [{"name": "c", "image": "kubevirt-py/sleeper"}]}},
    }


async def compact_etcd(cluster: Cluster, revision: int) -> None:
    """Physically compact etcd up to `revision` (its JSON gateway)."""
    url = f"http://127.0.0.1:{cluster.ports.etcd}/v3/kv/compaction"
    async with asyncio.timeout(30), aiohttp.ClientSession() as session:
        resp = await session.post(url, json={"revision": str(revision), "physical": True})
        assert resp.status == 200, await resp.text()


async def test_informer_relists_after_compacted_resource_version(
    local_cluster: Cluster, kube: KubeClient, namespace: str
) -> None:
    """While the informer is away, objects change and etcd compacts past its resourceVersion:
    its resumed watch gets 410 Gone, it relists, and the relist delivers exactly the
    differences (changed → update, removed → delete, created → add); the new watch then
    sees later changes. (PodTemplates bypass the watch cache in localkube.)"""
    for name in ("keep", "change", "remove"):
        await kube.create(PODTEMPLATES, template(name, "1"), namespace=namespace)
    source = GatedSource(ListWatch(kube, PODTEMPLATES, Selector(namespace=namespace)))
    config = InformerConfig(
        name="podtemplates",
        watch_timeout_seconds=1,
        backoff=BackoffPolicy(initial=0.1, cap=0.5),
    )
    informer = Informer(source, config, decode=raw)
    seen = Seen()
    informer.add_handlers(seen.handlers())
    with capture_logs() as logs:
        async with running(informer):
            await wait_for_sync(informer, timeout=30)
            source.open.clear()
            await asyncio.wait_for(source.parked.wait(), timeout=30)
            stale_rv = informer.resource_version
            before = len(seen.events)

            await kube.patch(
                PODTEMPLATES, "change", {"metadata": {"labels": {"step": "2"}}}, namespace=namespace
            )
            await kube.delete(PODTEMPLATES, "remove", namespace=namespace)
            await kube.create(PODTEMPLATES, template("new", "1"), namespace=namespace)
            current = (await kube.list(PODTEMPLATES, namespace=namespace)).resource_version
            await compact_etcd(local_cluster, int(current))

            source.open.set()
            await seen.until(lambda: informer.relists == 2 and len(seen.events) >= before + 3)
            assert sorted(seen.events[before:]) == [
                ("add", "new", {"step": "1"}),
                ("delete", "remove", {"step": "1"}),
                ("update", "change", {"step": "2"}),
            ]
            assert sorted(informer.store.keys()) == [
                f"{namespace}/{n}" for n in ("change", "keep", "new")
            ]

            await kube.patch(
                PODTEMPLATES, "keep", {"metadata": {"labels": {"step": "3"}}}, namespace=namespace
            )
            await seen.until(lambda: ("update", "keep", {"step": "3"}) in seen.events)
    expired = [e for e in logs if e["event"] == "informer_resource_version_expired"]
    assert expired and expired[0]["resource_version"] == stale_rv
    assert informer.relists == 2
