"""An unexpected sync error becomes Synchronized=False (the exception's class and message)
on the object: written once while unchanged, at most once per interval while it changes,
its traceback logged once per distinct error, cleared by the next successful sync (any
Synchronized=False on kinds whose own logic never sets one; only its own on VMIs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from structlog.testing import capture_logs

from shared.kube import VMIS, VMS, Conflict, KubeClient
from shared.kube.syncfailure import FailureTarget, SyncFailures
from shared.model import VirtualMachine, VirtualMachineInstance
from shared.model._codec import Model
from tests.unit.shared.kube.fakes import FakeApi

KEY = "ns/vm1"


class Store:
    """The informer's cache, refreshed from the fake API server by hand."""

    def __init__(self, api: FakeApi, model: type[Model], resource: Any) -> None:
        self._api, self._model, self._resource = api, model, resource

    def get(self, key: str) -> Any:
        return self._model.from_dict(self._api.stored(self._resource, key))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def rig(
    *, resource: Any = VMS, model: type[Model] = VirtualMachine, owns: bool = True
) -> tuple[FakeApi, SyncFailures, Clock]:
    api = FakeApi()
    kind = "VirtualMachine" if resource is VMS else "VirtualMachineInstance"
    api.seed(resource, {"apiVersion": "kubevirt.io/v1", "kind": kind,
                        "metadata": {"name": "vm1", "namespace": "ns", "uid": "u"},
                        "spec": {}, "status": {}})  # fmt: skip
    clock = Clock()
    target = FailureTarget(
        resource=resource, store=Store(api, model, resource), owns_condition=owns
    )
    return api, SyncFailures(cast(KubeClient, api), target, min_interval=10, monotonic=clock), clock


def conditions(api: FakeApi, resource: Any = VMS) -> list[dict[str, Any]]:
    return list((api.stored(resource, KEY).get("status") or {}).get("conditions") or [])


def patches(api: FakeApi) -> int:
    return sum(1 for c in api.calls if c[0] == "patch")


def tracebacks(logs: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for e in logs if e["event"] == "sync_unexpected_error" and e.get("exc_info"))


async def test_an_unexpected_error_becomes_a_condition_once() -> None:
    """Synchronized=False, reason the class, message the text; retries of the same error
    neither rewrite it nor log its traceback again."""
    api, failures, clock = rig()
    with capture_logs() as logs:
        for _ in range(5):
            await failures.failed(KEY, ValueError("Attribute's length must be >= 1 and <= 64"))
            clock.now += 30
    (cond,) = conditions(api)
    assert (cond["type"], cond["status"], cond["reason"]) == ("Synchronized", "False", "ValueError")
    assert cond["message"] == "Attribute's length must be >= 1 and <= 64"
    assert patches(api) == 1
    assert tracebacks(logs) == 1
    assert sum(1 for e in logs if e["event"] == "sync_unexpected_error_again") == 4


async def test_a_changing_error_is_written_at_most_once_per_interval() -> None:
    """An error whose message changes each retry: one write per interval, one traceback per
    distinct error."""
    api, failures, clock = rig()
    with capture_logs() as logs:
        for i in range(4):
            await failures.failed(KEY, KeyError(f"item {i}"))
            clock.now += 4  # three retries inside the 10 s interval, the fourth after it
    assert patches(api) == 2
    assert conditions(api)[0]["message"] == "'item 3'"
    assert tracebacks(logs) == 4


async def test_the_next_successful_sync_clears_it() -> None:
    """Success removes the condition (and logs the recovery); a second success writes
    nothing."""
    api, failures, _ = rig()
    await failures.failed(KEY, RuntimeError("boom"))
    with capture_logs() as logs:
        assert await failures.succeeded(KEY)
    assert conditions(api) == []
    assert [e["event"] for e in logs] == ["sync_recovered"]
    before = patches(api)
    assert await failures.succeeded(KEY)
    assert patches(api) == before


async def test_a_condition_left_by_a_previous_leader_is_cleared() -> None:
    """Kinds that never set Synchronized themselves: any Synchronized=False goes at the
    first successful sync, though this process never wrote it."""
    api, failures, _ = rig()
    stale = {"type": "Synchronized", "status": "False", "reason": "TypeError", "message": "x"}
    keep = {"type": "Ready", "status": "True"}
    api.stored(VMS, KEY)["status"] = {"conditions": [keep, stale]}
    assert await failures.succeeded(KEY)
    assert conditions(api) == [keep]


async def test_a_vmis_own_synchronized_condition_is_left_alone() -> None:
    """On VMIs Synchronized is also the controller's own (FailedCreate …): success clears
    only what this writer wrote."""
    api, failures, _ = rig(resource=VMIS, model=VirtualMachineInstance, owns=False)
    own = {"type": "Synchronized", "status": "False", "reason": "FailedCreate", "message": "x"}
    api.stored(VMIS, KEY)["status"] = {"conditions": [own]}
    assert await failures.succeeded(KEY)
    assert conditions(api, VMIS) == [own]
    api.stored(VMIS, KEY)["status"] = {}
    await failures.failed(KEY, ZeroDivisionError("division by zero"))
    assert conditions(api, VMIS)[0]["reason"] == "ZeroDivisionError"
    assert await failures.succeeded(KEY)
    assert conditions(api, VMIS) == []


async def test_a_clear_that_conflicts_is_retried() -> None:
    """A Conflict on the clearing write: succeeded() says so (the loop requeues soon) and
    the failure is still remembered for the next try."""
    api, failures, _ = rig()
    await failures.failed(KEY, RuntimeError("boom"))

    async def conflict(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise Conflict(409, "Conflict", "stale")

    real = api.patch
    api.patch = conflict  # type: ignore[method-assign]
    assert not await failures.succeeded(KEY)
    api.patch = real  # type: ignore[method-assign]
    assert await failures.succeeded(KEY)
    assert conditions(api) == []


async def test_without_a_target_it_only_logs() -> None:
    """Loops whose keys name no object of theirs (node, drain) log the traceback once."""
    failures = SyncFailures(None, None)
    with capture_logs() as logs:
        await failures.failed(KEY, OSError("x"))
        await failures.failed(KEY, OSError("x"))
        assert await failures.succeeded(KEY)
    assert tracebacks(logs) == 1
