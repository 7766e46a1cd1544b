"""Pods bound to this node: list + watch (spec.nodeName=<node>), one PodWorker each.

A 410 Gone or any watch failure leads to a relist, which also finds pods that vanished
while nobody watched and pod directories no pod owns any more (left by a killed agent).
"""

from __future__ import annotations

import asyncio
import shutil

import aiohttp
import structlog

from localkube.nodeagent.cgroups import Cgroup
from localkube.nodeagent.config import POD_ENV_MARKER, AgentConfig
from localkube.nodeagent.devices import DeviceManager
from localkube.nodeagent.kube import Kube, KubeError
from localkube.nodeagent.podspec import Pod
from localkube.nodeagent.worker import PodWorker
from localkube.procs import mounts_under, reap_marked

log = structlog.get_logger()


class PodManager:
    """Keeps one PodWorker per pod bound to the node."""

    def __init__(self, kube: Kube, cfg: AgentConfig, devices: DeviceManager) -> None:
        self._kube = kube
        self._cfg = cfg
        self._devices = devices
        self._workers: dict[str, PodWorker] = {}
        self._finished: set[str] = set()
        self._tg: asyncio.TaskGroup | None = None
        self._selector = f"spec.nodeName={cfg.node}"

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set, then stop every pod's processes and return."""
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            watcher = tg.create_task(self._watch_forever())
            await stop.wait()
            watcher.cancel()
            log.info("node_agent_stopping_pods", pods=len(self._workers))
            for worker in list(self._workers.values()):
                worker.shutdown()

    async def _watch_forever(self) -> None:
        rv = await self._relist()
        while True:
            try:
                async for event in self._kube.watch(
                    "/api/v1/pods", resource_version=rv, query={"fieldSelector": self._selector}
                ):
                    obj = event["object"]
                    rv = obj["metadata"]["resourceVersion"]
                    if event["type"] == "BOOKMARK":
                        continue
                    pod = Pod.from_dict(obj)
                    if event["type"] == "DELETED":
                        self._gone(pod)
                    else:
                        self._observe(pod)
                continue  # the server ended the watch: resume from rv
            except KubeError as e:
                if e.status == 410:
                    log.info("pod_watch_expired", resource_version=rv)
                else:
                    log.warning("pod_watch_failed", error=str(e))
                    await asyncio.sleep(1)
            except (aiohttp.ClientError, OSError, TimeoutError) as e:
                if (task := asyncio.current_task()) and task.cancelling():
                    raise
                log.warning("pod_watch_failed", error=f"{type(e).__name__}: {e}")
                await asyncio.sleep(1)
            rv = await self._relist()

    async def _relist(self) -> str:
        delay = 0.5
        while True:
            try:
                data = await self._kube.get("/api/v1/pods", fieldSelector=self._selector)
                break
            except (KubeError, aiohttp.ClientError, OSError, TimeoutError) as e:
                if (task := asyncio.current_task()) and task.cancelling():
                    raise
                log.warning("pod_list_failed", error=str(e))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10)
        seen = set()
        for obj in data.get("items") or ():
            pod = Pod.from_dict(obj)
            seen.add(pod.uid)
            self._observe(pod)
        for uid, worker in list(self._workers.items()):
            if uid not in seen:
                worker.vanish()
        await self._remove_orphan_dirs(seen)
        return str(data["metadata"]["resourceVersion"])

    def _observe(self, pod: Pod) -> None:
        if pod.uid in self._finished:
            return
        if (worker := self._workers.get(pod.uid)) is not None:
            worker.update(pod)
            return
        assert self._tg is not None
        worker = PodWorker(kube=self._kube, cfg=self._cfg, pod=pod, devices=self._devices)
        self._workers[pod.uid] = worker
        self._tg.create_task(self._run_worker(worker), name=f"pod-{pod.key}")

    def _gone(self, pod: Pod) -> None:
        if (worker := self._workers.get(pod.uid)) is not None:
            worker.vanish(pod)

    async def _run_worker(self, worker: PodWorker) -> None:
        try:
            await worker.run()
        except Exception:  # a task boundary: one broken pod must not stop the node
            log.exception("pod_worker_failed", pod=worker.pod.key)
            await reap_marked((POD_ENV_MARKER, worker.uid), grace=1)
        finally:
            self._workers.pop(worker.uid, None)
            self._finished.add(worker.uid)

    async def _remove_orphan_dirs(self, live: set[str]) -> None:
        """Directories (and processes) of pods that no longer exist in the API."""
        if not self._cfg.pods_dir.is_dir():
            return
        for entry in self._cfg.pods_dir.iterdir():
            uid = entry.name
            if uid in live or uid in self._workers:
                continue
            await reap_marked((POD_ENV_MARKER, uid), grace=1)
            cgroup = self._cfg.pod_cgroup(uid)
            if cgroup is not None and cgroup.is_dir():
                await Cgroup(cgroup).empty()
            if mounts_under([entry]):
                log.error("orphan_pod_dir_has_mounts", dir=str(entry))
                continue
            await asyncio.to_thread(shutil.rmtree, entry, True)
            log.info("orphan_pod_dir_removed", uid=uid)
