"""Every controller loop over an in-memory API server that feeds the informers, for churn
tests: create a VMI, play kubelet and handler until it runs, delete it, and let the real
loops sync each step (their `process`, as the workers call it).

The fake API server behaves as the real one where the loops can tell: a write is watched
(the informer of its kind gets the event), a delete of an object with finalizers only sets
its deletionTimestamp, and the object goes once its last finalizer is removed.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from typing import Any, cast

from controller.app import Controller
from controller.config import Config
from shared.kube import (
    EVENTS,
    PODS,
    VMIS,
    VMS,
    Informer,
    KubeClient,
    ListResult,
    NotFound,
    Registry,
    Resource,
    WatchEvent,
    WatchEventType,
)
from shared.labels import NODE_NAME_LABEL, VMI_FINALIZER
from shared.model import format_time
from tests.unit.controller.builders import NOW, vmi_dict
from tests.unit.shared.kube.fakes import FakeApi, FakeClock, FakeTimers

NODE = "node01"


class WatchedApi(FakeApi):
    """FakeApi whose writes reach the informers, with finalizer-aware deletes."""

    def __init__(self) -> None:
        super().__init__()
        self.informers: dict[str, Informer[Any]] = {}

    async def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        """As the API server does: an object made without a uid gets one."""
        meta = dict(body["metadata"])
        meta.setdefault("uid", str(uuid.uuid4()))
        return await super().create(resource, {**body, "metadata": meta}, namespace=namespace)

    def _written(self, obj: dict[str, Any], *, status: bool) -> None:
        meta = obj["metadata"]
        plural = self._plural_of_stored(obj)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.objects.pop((plural, _key(obj)), None)
            self._emit(plural, WatchEventType.DELETED, obj)
            return
        self._emit(plural, WatchEventType.MODIFIED, obj)

    def _plural_of_stored(self, obj: dict[str, Any]) -> str:
        for (plural, key), stored in self.objects.items():
            if key == _key(obj) and stored.get("kind") == obj.get("kind"):
                return plural
        return _plural_of(obj)

    def _emit(self, plural: str, type_: WatchEventType, obj: dict[str, Any]) -> None:
        if plural == EVENTS.plural:
            return
        informer = self.informers.get(plural)
        if informer is not None:
            informer._apply(WatchEvent(type_, copy.deepcopy(obj)))

    async def delete(self, resource: Resource, name: str, **kw: Any) -> dict[str, Any]:
        """Finalizers pending: only a deletionTimestamp (options are not checked)."""
        namespace: str | None = kw.get("namespace")
        self.calls.append(("delete", resource.plural))
        key = self._key(resource, name, namespace)
        obj = self.objects.get(key)
        if obj is None:
            raise NotFound(404, "NotFound", name)
        if obj["metadata"].get("finalizers"):
            obj["metadata"]["deletionTimestamp"] = format_time(NOW)
            self._bump(obj)
            self._emit(resource.plural, WatchEventType.MODIFIED, obj)
            return copy.deepcopy(obj)
        del self.objects[key]
        self._emit(resource.plural, WatchEventType.DELETED, obj)
        return obj

    async def list(
        self, resource: Resource, *, namespace: str | None = None, **_: Any
    ) -> ListResult:
        items = [
            copy.deepcopy(o)
            for (plural, key), o in self.objects.items()
            if plural == resource.plural and (namespace is None or key.startswith(f"{namespace}/"))
        ]
        return ListResult(items, str(self.rv))

    list_all = list

    def forget_history(self) -> None:
        """Drop what a real cluster drops on its own (Events expire, calls are not kept)."""
        self.calls.clear()
        for key in [k for k in self.objects if k[0] == EVENTS.plural]:
            del self.objects[key]


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])


def _plural_of(obj: Mapping[str, Any]) -> str:
    return {"Pod": PODS.plural, "VirtualMachineInstance": VMIS.plural}.get(str(obj.get("kind")), "")


class ControllerRig:
    """The whole controller (controller.app.Controller) over a WatchedApi, workers run by
    hand; delayed requeues fire on a hand-moved clock. It leads from the start unless
    `standby` (then `ctl.open_queues()` is its election)."""

    def __init__(self, *, standby: bool = False) -> None:
        self.api = WatchedApi()
        self.registry = Registry()
        self.ctl = Controller(Config(namespace="ns"), cast(KubeClient, self.api), self.registry)
        self.clock = FakeClock()
        self.timers = FakeTimers(self.clock)
        for loop, _ in self.ctl.loops.workers(self.ctl.config.workers):
            loop.queue._timers = self.timers  # no real timers: `later` fires them
        inf = self.ctl.informers
        self.api.informers = {VMIS.plural: inf.vmis, PODS.plural: inf.pods, VMS.plural: inf.vms}
        if not standby:
            self.ctl.open_queues()

    async def settle(self) -> None:
        """Run every queued key through its loop until no queue has work, then write the
        queued Events."""
        loops = self.ctl.loops.workers(self.ctl.config.workers)
        for _ in range(100):
            busy = False
            for loop, _n in loops:
                while len(loop.queue):
                    busy = True
                    key = await loop.queue.get()
                    assert key is not None
                    try:
                        await loop.process(key)
                    finally:
                        loop.queue.done(key)
            if not busy:
                break
        await self.ctl.recorder.drain()

    async def later(self) -> None:
        """Far in the future: every delayed requeue fired and synced."""
        self.timers.advance(10**6)
        await self.settle()

    async def vmi_lifecycle(self, name: str, uid: str) -> None:
        """One VMI from creation to gone: scheduled, running, deleted, stopped, removed."""
        raw = vmi_dict(name)
        raw["metadata"]["uid"] = uid
        await self.api.create(VMIS, raw, namespace="ns")
        await self.settle()
        await self._run(name)
        await self.api.delete(VMIS, name, namespace="ns")
        await self.settle()
        await self._stopped(name)
        await self.later()
        self.api.forget_history()

    async def vm_lifecycle(self, name: str, uid: str) -> None:
        """One VM: started (its VMI made and run), halted (its VMI stopped and removed),
        then deleted itself."""
        await self.api.create(VMS, vm_dict(name, uid), namespace="ns")
        await self.settle()
        await self._run(name)
        halt = {"metadata": {"generation": 2}, "spec": {"runStrategy": "Halted"}}
        await self._patch(VMS, name, halt)  # a spec change bumps the generation
        await self.settle()
        await self._stopped(name)
        await self.api.delete(VMS, name, namespace="ns")
        await self.settle()
        assert (VMS.plural, f"ns/{name}") not in self.api.objects
        await self.later()
        self.api.forget_history()

    async def _run(self, name: str) -> None:
        """Play kubelet (the launcher pod runs) and handler (the VMI runs)."""
        uid = self.api.stored(VMIS, f"ns/{name}")["metadata"]["uid"]
        pod = self._pod_of(uid)
        await self._patch(PODS, pod, {"spec": {"nodeName": NODE}, "status": _running_pod()})
        await self.settle()
        vmi = self.api.stored(VMIS, f"ns/{name}")
        assert vmi["metadata"].get("labels", {}).get(NODE_NAME_LABEL) == NODE, vmi["status"]
        assert VMI_FINALIZER in vmi["metadata"].get("finalizers", [])
        await self._patch(VMIS, name, {"status": {"phase": "Running"}}, status=True)
        await self.settle()

    async def _stopped(self, name: str) -> None:
        """Play handler for a VMI being deleted (the guest is seen off); then it is gone."""
        if (VMIS.plural, f"ns/{name}") in self.api.objects:
            await self._patch(VMIS, name, {"status": {"phase": "Succeeded"}}, status=True)
            await self.settle()
        assert (VMIS.plural, f"ns/{name}") not in self.api.objects
        assert not any(plural == PODS.plural for plural, _ in self.api.objects)

    def _pod_of(self, uid: str) -> str:
        for (plural, _), obj in self.api.objects.items():
            if plural == PODS.plural and uid in str(obj["metadata"].get("labels")):
                return str(obj["metadata"]["name"])
        raise AssertionError(f"no launcher pod for {uid}")

    async def _patch(
        self, resource: Resource, name: str, patch: dict[str, Any], *, status: bool = False
    ) -> None:
        await self.api.patch(
            resource, name, patch, namespace="ns", subresource="status" if status else None
        )


def vm_dict(name: str, uid: str) -> dict[str, Any]:
    """A VM that runs vmi_dict()'s spec (runStrategy Always)."""
    template = {"metadata": {"labels": {"app": name}}, "spec": vmi_dict(name)["spec"]}
    meta = {"name": name, "namespace": "ns", "uid": uid, "generation": 1}
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": meta,
        "spec": {"runStrategy": "Always", "template": template},
    }


def _running_pod() -> dict[str, Any]:
    return {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "compute", "ready": True, "state": {"running": {}}}],
    }
