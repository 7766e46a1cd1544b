"""A probed VMI's Ready follows its launcher pod's Ready condition while Running, except
where the handler has said the guest is paused or shutting down."""

from __future__ import annotations

from controller.vmi.probes import with_probe_readiness
from shared.model import ConditionStatus, VMIConditionType, VMIPhase
from tests.unit.controller.builders import NOW, condition, make_pod, make_vmi


def ready_of(status: object) -> tuple[object, object]:
    cond = status.condition(VMIConditionType.READY)  # type: ignore[attr-defined]
    return (cond.status, cond.reason) if cond is not None else (None, None)


def pod(ready: bool) -> object:
    conds = [{"type": "Ready", "status": "True" if ready else "False",
              "reason": None if ready else "ContainersNotReady"}]  # fmt: skip
    return make_pod(phase="Running", node="node01", conditions=conds)


def test_ready_follows_the_pod() -> None:
    """Pod Ready → VMI Ready True; pod not ready → False with the pod's reason."""
    vmi = make_vmi(phase=VMIPhase.RUNNING, node="node01")
    up = with_probe_readiness(vmi.status, pod(True), NOW)  # type: ignore[arg-type]
    assert ready_of(up) == (ConditionStatus.TRUE, None)
    down = with_probe_readiness(up, pod(False), NOW)  # type: ignore[arg-type]
    assert ready_of(down) == (ConditionStatus.FALSE, "ContainersNotReady")


def test_the_handlers_paused_and_terminating_stand() -> None:
    """Ready=False(Paused) or (PodTerminating) is not overridden by a ready pod."""
    for reason in ("Paused", "PodTerminating"):
        cond = condition("Ready", "False", reason=reason)
        vmi = make_vmi(phase=VMIPhase.RUNNING, node="node01", conditions=(cond,))
        status = with_probe_readiness(vmi.status, pod(True), NOW)  # type: ignore[arg-type]
        assert ready_of(status) == (ConditionStatus.FALSE, reason)
