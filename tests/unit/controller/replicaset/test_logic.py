"""Replica set decisions: claiming by selector and controller reference, scaling toward
spec.replicas in Kubernetes' deletion order, replacing finished members with backoff, and
the status the set shows."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controller.replicaset.logic import (
    Failures,
    InvalidSpec,
    ScaleError,
    check_spec,
    claim,
    deletion_order,
    next_status,
    plan_scale,
    vmi_body,
)
from controller.vm.logic import Backoff
from shared.model import VirtualMachineInstanceReplicaSet
from tests.unit.controller.builders import NOW
from tests.unit.controller.replicaset.fleet import RS_UID, make_rs, member, rs_dict


def test_claim_keeps_members_adopts_orphans_releases_strays() -> None:
    """Owned and selected: member; orphan selected: adopted; owned but no longer selected:
    released; owned by another controller or unselected orphans: untouched."""
    rs = make_rs()
    vmis = [
        member("a"),
        member("orphan", owner=None),
        member("stray", labels={"app": "other"}),
        member("theirs", owner="someone-else"),
        member("unselected-orphan", owner=None, labels={"app": "db"}),
        member("final-orphan", owner=None, phase="Failed"),
    ]
    got = claim(rs, vmis)
    assert [v.name for v in got.owned] == ["a"]
    assert [v.name for v in got.adopt] == ["orphan"]
    assert [v.name for v in got.release] == ["stray"]


def test_a_set_being_deleted_adopts_nothing() -> None:
    """Adoption needs a live set (Kubernetes re-checks deletion before adopting)."""
    raw = rs_dict()
    raw["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    rs = VirtualMachineInstanceReplicaSet.from_dict(raw)
    assert claim(rs, [member("orphan", owner=None)]).adopt == ()


@pytest.mark.parametrize(
    ("have", "wanted", "create", "delete"),
    [
        pytest.param(0, 3, 3, 0, id="scale-up-from-zero"),
        pytest.param(3, 3, 0, 0, id="steady"),
        pytest.param(4, 1, 0, 3, id="scale-down"),
        pytest.param(1, 4, 3, 0, id="scale-up"),
    ],
)
def test_plan_scale_moves_toward_replicas(have: int, wanted: int, create: int, delete: int) -> None:
    """The plan creates the shortfall or deletes the surplus of active members."""
    plan = plan_scale(make_rs(replicas=wanted), [member(f"m{i}") for i in range(have)])
    assert (plan.create, len(plan.delete)) == (create, delete)


def test_burst_caps_one_sync() -> None:
    """At most `burst` creations per sync; the rest follow in the next."""
    assert plan_scale(make_rs(replicas=300), [], burst=250).create == 250


def test_replicas_default_to_one() -> None:
    """spec.replicas unset means 1, as KubeVirt defaults it."""
    assert plan_scale(make_rs(replicas=None), []).create == 1


def test_paused_set_neither_creates_nor_deletes() -> None:
    """spec.paused freezes the set's membership."""
    assert plan_scale(make_rs(replicas=5, paused=True), []).create == 0
    assert plan_scale(make_rs(replicas=0, paused=True), [member("a")]).delete == ()


def test_finished_members_are_cleaned_and_replaced() -> None:
    """A Failed or Succeeded member is deleted and not counted: a replacement is made."""
    owned = [member("ok"), member("dead", phase="Failed"), member("done", phase="Succeeded")]
    plan = plan_scale(make_rs(replicas=3), owned)
    assert [v.name for v in plan.clean] == ["dead", "done"]
    assert plan.create == 2


def test_failure_backoff_holds_replacements_not_deletions() -> None:
    """After failures the replacement waits base·2^(n-1) s; cleaning goes on."""
    backoff = Backoff(base=10, cap=300)
    failures = Failures().after(2, NOW)
    hold = failures.hold(now=NOW + timedelta(seconds=5), backoff=backoff)
    assert hold == pytest.approx(15.0)
    plan = plan_scale(make_rs(replicas=2), [member("dead", phase="Failed")], hold=hold)
    assert plan.create == 0 and plan.hold == hold and len(plan.clean) == 1
    assert failures.hold(now=NOW + timedelta(seconds=25), backoff=backoff) is None


def test_deletion_order_prefers_cheap_members() -> None:
    """Unscheduled before scheduled, then not ready before ready, then newest first."""
    vmis = [
        member("old-ready", age=300),
        member("new-ready", age=10),
        member("not-ready", ready=False, age=400),
        member("pending", phase="Pending", node=None, ready=False, age=500),
    ]
    order = [v.name for v in deletion_order(vmis)]
    assert order == ["pending", "not-ready", "new-ready", "old-ready"]


def test_status_counts_active_and_ready_and_renders_the_selector() -> None:
    """replicas = active members, readyReplicas = those Ready; deleting/final ones not."""
    owned = [
        member("a"),
        member("b", ready=False),
        member("c", deleting=True),
        member("d", phase="Failed", ready=False),
    ]
    status = next_status(make_rs(), owned, error=None, now=NOW)
    assert (status.replicas, status.ready_replicas) == (2, 1)
    assert status.label_selector == "app=web"
    assert status.conditions == ()


def test_status_conditions_follow_pause_and_errors() -> None:
    """ReplicaPaused while paused; ReplicaFailure with the scale error's reason, and the
    same condition kept (its transition time too) while the error lasts."""
    rs = make_rs(paused=True)
    error = ScaleError(reason="FailedCreate", message="quota")
    status = next_status(rs, [], error=error, now=NOW)
    assert [(c.type, c.reason) for c in status.conditions] == [
        ("ReplicaPaused", "Paused"),
        ("ReplicaFailure", "FailedCreate"),
    ]
    again = next_status(
        make_rs(paused=True, **status.to_dict()), [], error=error, now=NOW + timedelta(1)
    )
    assert again.conditions == status.conditions
    cleared = next_status(make_rs(**status.to_dict()), [], error=None, now=NOW)
    assert cleared.conditions == ()


def test_vmi_body_is_the_template_owned_by_the_set() -> None:
    """Members get generateName from the set, the template's labels and an owner ref."""
    body = vmi_body(make_rs())
    meta = body["metadata"]
    assert meta["generateName"] == "web" and "name" not in meta
    assert meta["labels"] == {"app": "web"}
    [ref] = meta["ownerReferences"]
    assert ref["uid"] == RS_UID and ref["controller"] is True
    assert body["spec"]["domain"]["memory"] == {"guest": "64Mi"}


def test_a_selector_that_misses_the_template_is_not_synced() -> None:
    """check_spec refuses a set whose selector does not select its own template."""
    raw = rs_dict()
    raw["spec"]["selector"] = {"matchLabels": {"app": "db"}}
    with pytest.raises(InvalidSpec, match="does not match"):
        check_spec(VirtualMachineInstanceReplicaSet.from_dict(raw))
