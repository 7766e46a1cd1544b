"""The handler's reconcile loop: an unexpected exception (not a SyncError) becomes
Synchronized=False on the VMI with its class and message, the key retried with backoff;
the next successful reconcile clears it."""

from __future__ import annotations

import dataclasses

import pytest

from handler.reconcile import Reconciler
from shared.kube import VMIS
from shared.kube.syncfailure import FailureTarget, SyncFailures
from tests.unit.handler.fakes import vmi_dict
from tests.unit.handler.rig import Rig


async def test_an_unexpected_reconcile_error_is_a_condition_until_a_success(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ValueError in reconcile: Synchronized=False ValueError on the VMI, requeued rate
    limited; then a reconcile that works removes it and forgets the key's backoff."""
    rig = Rig()
    target = FailureTarget(resource=VMIS, store=rig.store, owns_condition=False)
    old = rig.reconciler
    deps = dataclasses.replace(old._d, failures=SyncFailures(rig.api, target))
    rig.reconciler = Reconciler(deps, old._o)
    key = rig.put(vmi_dict())
    rig.launcher(key)
    real = rig.reconciler.reconcile

    async def broken(key: str) -> None:
        raise ValueError("unexpected shape")

    monkeypatch.setattr(rig.reconciler, "reconcile", broken)
    vmi = await rig.process(key)
    cond = vmi.status.condition("Synchronized")
    assert cond is not None and (cond.status, cond.reason, cond.message) == (
        "False", "ValueError", "unexpected shape",
    )  # fmt: skip
    assert rig.queue.rate_limited == [key]

    rig.informer_sync()
    monkeypatch.setattr(rig.reconciler, "reconcile", real)
    await rig.process(key)
    rig.informer_sync()
    await rig.process(key)  # the first success may race its own status write
    assert rig.api.vmi(key).status.condition("Synchronized") is None
    assert key in rig.queue.forgotten
