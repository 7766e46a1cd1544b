"""The controller's loops: an unexpected exception in a sync (not a SyncError) becomes
Synchronized=False on the loop's object with its class and message, the key retried with
backoff; the next successful sync clears it; loops without an object only log."""

from __future__ import annotations

from typing import cast

from structlog.testing import capture_logs

from controller.informers import Informers, build_informers
from controller.reconcile import Reconciler
from shared.kube import VMS, KubeClient, QueueConfig, Registry, WorkQueue
from shared.model import VirtualMachine
from tests.unit.controller import builders
from tests.unit.shared.kube.fakes import FakeApi, FakeClock, FakeTimers

KEY = "ns/vm1"


class Flaky(Reconciler):
    """A VM loop whose sync raises `error` while it is set."""

    kind = "vm"
    synchronized_on: str | None = "vms"
    error: Exception | None = None

    async def sync(self, key: str) -> None:
        if self.error is not None:
            raise self.error


def rig(loop: type[Flaky] = Flaky) -> tuple[FakeApi, Flaky, WorkQueue, Informers]:
    api = FakeApi()
    client = cast(KubeClient, api)
    informers = build_informers(client)
    clock = FakeClock()
    queue = WorkQueue(
        QueueConfig(name="t"), registry=Registry(), clock=clock, timers=FakeTimers(clock)
    )
    ctl = loop(builders.deps(client, informers), queue)
    vm = builders.make_vm().to_dict()
    api.seed(VMS, vm)
    informers.vms.store.upsert(KEY, VirtualMachine.from_dict(api.stored(VMS, KEY)))
    return api, ctl, queue, informers


def synchronized(api: FakeApi) -> list[dict[str, object]]:
    conds = (api.stored(VMS, KEY).get("status") or {}).get("conditions") or []
    return [c for c in conds if c.get("type") == "Synchronized"]


async def test_an_unexpected_sync_error_is_a_condition_until_a_success() -> None:
    """KeyError in sync: Synchronized=False KeyError on the VM, the key backing off; a
    working sync clears it."""
    api, ctl, queue, informers = rig()
    ctl.error = KeyError("spec")
    await ctl.process(KEY)
    (cond,) = synchronized(api)
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "KeyError", "'spec'")
    assert queue.num_requeues(KEY) == 1

    informers.vms.store.upsert(KEY, VirtualMachine.from_dict(api.stored(VMS, KEY)))
    ctl.error = None
    await ctl.process(KEY)
    assert synchronized(api) == []
    assert queue.num_requeues(KEY) == 0


class NoObject(Flaky):
    synchronized_on = None


async def test_a_loop_without_an_object_only_logs_the_traceback_once() -> None:
    """The node and drain loops: nothing written, the traceback logged once per error."""
    api, ctl, queue, _ = rig(NoObject)
    ctl.error = RuntimeError("boom")
    with capture_logs() as logs:
        await ctl.process(KEY)
        await ctl.process(KEY)
    assert synchronized(api) == []
    assert [e["event"] for e in logs] == ["sync_unexpected_error", "sync_unexpected_error_again"]
    assert queue.num_requeues(KEY) == 2
