"""One pod's life on the node: volumes, init containers, containers, status, deletion.

A PodWorker owns its containers' processes. It stops in one of three ways:
deletion (the API object got a deletionTimestamp: SIGTERM, wait out the grace period,
SIGKILL, clean up, then delete the object with gracePeriodSeconds=0), disappearance
(the object is gone: same without the delete), or agent shutdown (processes stopped
within a short grace, the object left alone). Device-plugin resources a container requests
are allocated once, before its first start, and freed when the pod's worker ends.
When a container's main process ends, every other process of the container is ended too
(its cgroup, cgroups.py), as a runtime does: nothing it started outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
from pathlib import Path
from typing import Protocol

import aiohttp
import structlog

from localkube.imagestore import ImageStore
from localkube.nodeagent import images
from localkube.nodeagent.cgroups import Cgroup
from localkube.nodeagent.config import CONTAINER_ENV_MARKER, POD_ENV_MARKER, AgentConfig
from localkube.nodeagent.devices import Allocation
from localkube.nodeagent.env import base_env, container_env, expand
from localkube.nodeagent.kube import JSON, SMP, Kube, KubeError
from localkube.nodeagent.node import now_rfc3339
from localkube.nodeagent.podspec import Container, Pod, RestartPolicy
from localkube.nodeagent.refs import ConfigError, Refs
from localkube.nodeagent.runtime import ContainerProcess, Mount, RootView
from localkube.nodeagent.status import ContainerRecord, pod_status
from localkube.nodeagent.volumes import prepare_volumes
from localkube.procs import mounts_under, reap_marked, reap_mentioning, run_cmd

log = structlog.get_logger()
API_ERRORS = (KubeError, aiohttp.ClientError, OSError, TimeoutError)


class Devices(Protocol):
    """The node's device manager, as a pod worker uses it."""

    async def allocate(self, pod_uid: str, container: Container) -> Allocation: ...

    def release(self, pod_uid: str) -> None: ...


class PodWorker:
    """Runs one pod bound to this node until it is deleted or the agent stops."""

    def __init__(self, *, kube: Kube, cfg: AgentConfig, pod: Pod, devices: Devices) -> None:
        self._kube, self._cfg, self.pod = kube, cfg, pod
        self._devices = devices
        self._allocations: dict[str, Allocation] = {}
        self.uid = pod.uid
        self._dir = cfg.pod_dir(pod.uid)
        self._stop = asyncio.Event()
        self._changed = asyncio.Event()
        self._kill_at: float | None = None
        self._vanished = self._shutdown = self._sandbox_ready = False
        self._start_time = str(pod.raw.get("status", {}).get("startTime") or now_rfc3339())
        self._init = [
            ContainerRecord.restore(c.name, c.image, pod.api_status(c.name, init=True), init=True)
            for c in pod.init_containers
        ]
        self._main = [
            ContainerRecord.restore(c.name, c.image, pod.api_status(c.name), init=False)
            for c in pod.containers
        ]
        self._last_sent: JSON | None = None
        self._procs: dict[str, ContainerProcess] = {}
        self.update(pod)

    # -- events from the pod manager ---------------------------------------------------

    def update(self, pod: Pod) -> None:
        self.pod = pod
        if pod.deleting:
            grace = pod.deletion_grace if pod.deletion_grace is not None else pod.grace_seconds
            self._request_stop(grace)

    def vanish(self, pod: Pod | None = None) -> None:
        """The API object is gone (force-deleted): stop without deleting it again."""
        self._vanished = True
        grace = pod.deletion_grace if pod and pod.deletion_grace is not None else 0
        self._request_stop(max(grace, 1))

    def shutdown(self) -> None:
        """The agent is stopping: end the processes, leave the API object alone."""
        self._shutdown = True
        self._request_stop(min(self.pod.grace_seconds, self._cfg.shutdown_grace_max))

    def _request_stop(self, grace: float) -> None:
        at = asyncio.get_running_loop().time() + grace
        self._kill_at = at if self._kill_at is None else min(self._kill_at, at)
        self._stop.set()

    # -- the pod's life ----------------------------------------------------------------

    async def run(self) -> None:
        with structlog.contextvars.bound_contextvars(pod=self.pod.key, uid=self.uid):
            log.info("pod_worker_started", phase=self.pod.phase)
            await self._end_pod_processes()  # orphans of a past agent
            async with asyncio.TaskGroup() as tg:
                reporter = tg.create_task(self._report_loop())
                try:
                    await self._lifecycle()
                finally:
                    self._kill_all()
                    self._devices.release(self.uid)
                    await self._end_pod_processes()
                reporter.cancel()
            if self._shutdown:
                return
            await self._cleanup()
            if not self._vanished:
                await self._delete_from_api()

    async def _lifecycle(self) -> None:
        self._changed.set()
        mounts = await self._setup()
        if mounts is None:
            return
        for spec, rec in zip(self.pod.init_containers, self._init, strict=True):
            if not await self._run_container(spec, rec, mounts, init=True):
                await self._stop.wait()
                return
        async with asyncio.TaskGroup() as tg:
            for spec, rec in zip(self.pod.containers, self._main, strict=True):
                tg.create_task(self._run_container(spec, rec, mounts, init=False))
        await self._stop.wait()

    async def _setup(self) -> dict[str, Path] | None:
        # Short first retry: right after binding, the Node authorizer may not yet know
        # the pod is on this node (TokenRequest/ConfigMap reads get 403 for a moment).
        backoff = 0.5
        while not self._stop.is_set():
            if self.pod.terminal:
                await self._stop.wait()
                return None
            try:
                self._dir.mkdir(parents=True, exist_ok=True)
                mounts = await prepare_volumes(
                    self._kube, Refs(self._kube, self.pod), self.pod, self._dir
                )
            except (ConfigError, *API_ERRORS) as e:
                log.warning("pod_volumes_failed", error=str(e))
                for rec in (*self._init, *self._main):
                    if not rec.ever_ran:
                        rec.set_waiting("ContainerCreating", f"volume setup failed: {e}")
                self._changed.set()
                await self._sleep(backoff)
                backoff = min(backoff * 2, self._cfg.restart_backoff_max)
                continue
            self._sandbox_ready = True
            self._changed.set()
            return mounts
        return None

    async def _run_container(
        self, spec: Container, rec: ContainerRecord, mounts: dict[str, Path], *, init: bool
    ) -> bool:
        """Run (and restart per policy) one container; True if it ended with exit 0."""
        policy = self.pod.restart_policy
        if init and policy is RestartPolicy.ALWAYS:
            policy = RestartPolicy.ON_FAILURE
        loop = asyncio.get_running_loop()
        backoff = self._cfg.restart_backoff_initial
        if rec.terminated is not None and not policy.restarts(rec.terminated["exitCode"]):
            return bool(rec.terminated["exitCode"] == 0)
        while not self._stop.is_set():
            try:
                proc = await self._start(spec, rec, mounts)
            except images.ImageNotFound as e:
                rec.set_waiting("ErrImagePull", str(e))
                self._changed.set()
                log.warning("container_image_unknown", container=spec.name, image=spec.image)
                return False
            except ConfigError as e:
                rec.set_waiting("CreateContainerConfigError", str(e))
                self._changed.set()
                await self._sleep(backoff)
                backoff = min(backoff * 2, self._cfg.restart_backoff_max)
                continue
            started = loop.time()
            code = await self._await_exit(proc)
            if leftovers := await proc.end_leftovers():
                log.warning("container_leftovers_killed", container=spec.name, pids=leftovers)
            rec.set_terminated(code, proc.log_tail() if code != 0 else "")
            self._changed.set()
            log.info("container_exited", container=spec.name, exit_code=code)
            if self._stop.is_set() or not policy.restarts(code):
                return code == 0
            if loop.time() - started > self._cfg.restart_backoff_max:
                backoff = self._cfg.restart_backoff_initial
            rec.set_waiting(
                "CrashLoopBackOff",
                f"back-off {backoff:.0f}s restarting failed "
                f"container={spec.name} pod={self.pod.name}_{self.pod.namespace}",
            )
            self._changed.set()
            await self._sleep(backoff)
            backoff = min(backoff * 2, self._cfg.restart_backoff_max)
        return False

    async def _start(
        self, spec: Container, rec: ContainerRecord, mounts: dict[str, Path]
    ) -> ContainerProcess:
        launch = images.resolve(
            spec.image,
            spec.command,
            spec.args,
            python=self._cfg.python,
            store=ImageStore(self._cfg.image_store),
        )
        base = base_env(self._cfg, self.pod, api=self._kube.server)
        env = await container_env(Refs(self._kube, self.pod), self.pod, spec, base=base)
        marker = (CONTAINER_ENV_MARKER, f"{self.uid}/{spec.name}")
        env[marker[0]] = marker[1]
        if spec.name not in self._allocations:
            self._allocations[spec.name] = await self._devices.allocate(self.uid, spec)
        allocation = self._allocations[spec.name]
        env.update(allocation.env)
        binds = [*_binds(spec, mounts, env), *allocation.mounts]
        attempt = rec.restart_count + (1 if rec.ever_ran else 0)
        pod_cgroup = self._cfg.pod_cgroup(self.uid)
        view = None
        if launch.rootfs is not None:
            view = RootView(image=launch.rootfs, base=self._dir / "rootfs" / spec.name)
        proc = await ContainerProcess.start(
            [expand(a, env) for a in launch.argv],
            env=env,
            mounts=binds,
            workdir=spec.working_dir,
            log_file=self._dir / "logs" / spec.name / f"{attempt}.log",
            marker=marker,
            cgroup=Cgroup.make(pod_cgroup / spec.name) if pod_cgroup else None,
            view=view,
        )
        rec.set_running()
        self._changed.set()
        self._procs[spec.name] = proc
        log.info(
            "container_started",
            container=spec.name,
            pid=proc.pid,
            argv=launch.argv,
            image_root=str(launch.rootfs) if launch.rootfs else None,
        )
        return proc

    async def _await_exit(self, proc: ContainerProcess) -> int:
        async with asyncio.TaskGroup() as tg:
            exited = tg.create_task(proc.wait())
            stopped = tg.create_task(self._stop.wait())
            await asyncio.wait((exited, stopped), return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if not exited.done():
                exited.cancel()
        if not exited.cancelled():
            return exited.result()
        return await self._terminate(proc)

    async def _terminate(self, proc: ContainerProcess) -> int:
        """SIGTERM, wait until the (possibly shortened) deadline, then SIGKILL the group."""
        loop = asyncio.get_running_loop()
        proc.signal(signal.SIGTERM)
        log.info(
            "container_sigterm", pid=proc.pid, grace=round((self._kill_at or 0) - loop.time(), 1)
        )
        while not proc.exited and (self._kill_at or 0) > loop.time():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(0.5, (self._kill_at or 0) - loop.time())):
                    await proc.wait()
        if not proc.exited:
            log.info("container_sigkill", pid=proc.pid)
            proc.kill_group()
        async with asyncio.timeout(30):
            code = await proc.wait()
        proc.kill_group()
        return code

    # -- helpers -------------------------------------------------------------------------

    def _kill_all(self) -> None:
        for proc in self._procs.values():
            if not proc.exited:
                proc.kill_group()

    async def _end_pod_processes(self) -> None:
        """Every process of the pod's containers (their cgroups, their env marker), e.g.
        the orphans a killed agent left; the pod's cgroups are removed."""
        await reap_marked((POD_ENV_MARKER, self.uid), grace=0)
        path = self._cfg.pod_cgroup(self.uid)
        leftovers = await Cgroup(path).empty() if path is not None and path.is_dir() else []
        if leftovers:
            log.warning("pod_leftovers_killed", pids=leftovers)

    async def _sleep(self, seconds: float) -> None:
        """Sleep, waking early when the pod is stopping."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._stop.wait()

    async def _report_loop(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            status = pod_status(
                self.pod,
                init=self._init,
                main=self._main,
                sandbox_ready=self._sandbox_ready,
                start_time=self._start_time,
            )
            if status == self._last_sent:
                continue
            body = {"metadata": {"uid": self.uid}, "status": status}
            path = f"/api/v1/namespaces/{self.pod.namespace}/pods/{self.pod.name}/status"
            try:
                await self._kube.request("PATCH", path, body=body, content_type=SMP)
                self._last_sent = status
            except KubeError as e:
                if e.status in (404, 409, 422):
                    return
                log.warning("pod_status_failed", error=str(e))
                await asyncio.sleep(1)
                self._changed.set()
            except API_ERRORS as e:
                log.warning("pod_status_failed", error=str(e))
                await asyncio.sleep(1)
                self._changed.set()

    async def _cleanup(self) -> None:
        await reap_marked((POD_ENV_MARKER, self.uid), grace=2)
        await reap_mentioning(self._dir, grace=2)
        for target in mounts_under([self._dir]):
            log.warning("pod_mount_left_behind", target=target)
            await run_cmd(["umount", "-l", target], timeout=30)
        await asyncio.to_thread(shutil.rmtree, self._dir, True)
        log.info("pod_cleaned_up")

    async def _delete_from_api(self) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": self.uid},
        }
        path = f"/api/v1/namespaces/{self.pod.namespace}/pods/{self.pod.name}"
        for attempt in range(10):
            try:
                await self._kube.request("DELETE", path, body=body)
                log.info("pod_deleted")
                return
            except KubeError as e:
                if e.status in (404, 409):
                    return
                log.warning("pod_delete_failed", error=str(e), attempt=attempt)
            except API_ERRORS as e:
                log.warning("pod_delete_failed", error=str(e), attempt=attempt)
            await asyncio.sleep(min(2**attempt, 10))


def _binds(spec: Container, mounts: dict[str, Path], env: dict[str, str]) -> list[Mount]:
    """The container's volumeMounts as bind mounts; subPath(Expr) dirs made as kubelet does."""
    binds = []
    for m in spec.mounts:
        if m.name not in mounts:
            raise ConfigError(f"volumeMount {m.name!r} has no volume")
        sub = m.sub_path or expand(m.sub_path_expr, env)
        source = mounts[m.name]
        if sub:
            if Path(sub).is_absolute() or ".." in Path(sub).parts:
                raise ConfigError(f"volumeMount {m.name!r}: subPath {sub!r} must stay inside")
            source = source / sub
            if not source.exists():
                source.mkdir(parents=True, exist_ok=True)
        binds.append(Mount(source=source, target=m.mount_path, read_only=m.read_only))
    return binds
