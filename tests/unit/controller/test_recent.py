"""The write-back overlay: a sync plans from our newer write until the informer catches up."""

from __future__ import annotations

import dataclasses

from controller.recent import Recent
from shared.model import VirtualMachineInstance, VMIPhase
from tests.unit.controller.builders import make_vmi


def at(rv: str, phase: VMIPhase | None = None, uid: str = "u1") -> VirtualMachineInstance:
    vmi = make_vmi(phase=phase, uid=uid)
    return dataclasses.replace(vmi, metadata=dataclasses.replace(vmi.metadata, resource_version=rv))


def test_newer_write_wins_over_a_stale_cache() -> None:
    """Cache at rv 5, our write returned rv 7: plan from the write."""
    recent: Recent[VirtualMachineInstance] = Recent()
    mine = at("7", VMIPhase.SCHEDULING)
    recent.remember(mine)
    assert recent.latest(at("5")) is mine
    assert len(recent) == 1


def test_caught_up_cache_drops_the_entry() -> None:
    """Once the informer delivers rv ≥ ours the entry goes (no memory in the steady state)."""
    recent: Recent[VirtualMachineInstance] = Recent()
    recent.remember(at("7"))
    cached = at("9")
    recent.observe(cached)
    assert len(recent) == 0
    assert recent.latest(cached) is cached


def test_a_recreated_object_is_never_shadowed() -> None:
    """Same name, new UID: the cache wins and the old entry is dropped."""
    recent: Recent[VirtualMachineInstance] = Recent()
    recent.remember(at("70", uid="old"))
    fresh = at("3", uid="new")
    assert recent.latest(fresh) is fresh and len(recent) == 0


def test_forget_and_none() -> None:
    """Deleted objects are forgotten; no cached object means none."""
    recent: Recent[VirtualMachineInstance] = Recent()
    recent.remember(at("7"))
    assert recent.latest(None) is None
    recent.forget("ns/vm1")
    assert len(recent) == 0


def test_a_write_that_removed_the_last_finalizer_is_not_remembered() -> None:
    """A deleted object's write that dropped its last finalizer returns an object that is
    gone: its delete event may have come first, so remembering it would keep it forever."""
    recent: Recent[VirtualMachineInstance] = Recent()
    recent.remember(at("7"))
    gone = make_vmi(deleting=True)
    assert not gone.metadata.finalizers
    recent.remember(gone)
    assert len(recent) == 0
