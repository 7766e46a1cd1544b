"""The fuzzer's generator (tests/fuzz): schema -> values, deterministic from a seed."""

from __future__ import annotations

import json
import random
from typing import Any

from tests.fuzz.bases import SPECS, perturbed, set_at_random_path
from tests.fuzz.judge import Outcome, has_status, judge
from tests.fuzz.objects import case, cases, load_kinds
from tests.fuzz.regressions import regression_cases
from tests.fuzz.runner import pick_stored, tamed
from tests.fuzz.values import (
    BOUNDARY_STRINGS,
    HUGE_LIST,
    QUANTITIES,
    UNKNOWN_FIELD,
    WRONG_TYPES,
    Knobs,
    value,
)

OBJ: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "size": {"x-kubernetes-int-or-string": True},
        "mode": {"type": "string", "enum": ["A", "B"]},
        "items": {"type": "array", "items": {"type": "integer"}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}
ALWAYS = Knobs(edge=1.0, wrong_type=0.0, drop_required=0.0, unknown_field=0.0, null=0.0)
NEVER = Knobs(edge=0.0, wrong_type=0.0, drop_required=0.0, unknown_field=0.0, null=0.0)


def test_same_seed_same_values() -> None:
    """A value depends only on the schema and the rng's seed."""
    a = [value(OBJ, random.Random(7), knobs=Knobs()) for _ in range(3)]
    b = [value(OBJ, random.Random(7), knobs=Knobs()) for _ in range(3)]
    assert a == b


def test_plausible_values_fit_the_schema() -> None:
    """With no edges, required fields are present and scalars have the schema's type."""
    for seed in range(50):
        got = value(OBJ, random.Random(seed), knobs=NEVER)
        assert isinstance(got["name"], str)
        assert got.get("mode", "A") in ("A", "B")
        assert all(isinstance(i, int) for i in got.get("items", []))
        assert all(isinstance(v, str) for v in got.get("labels", {}).values())


def test_edges_are_boundary_values() -> None:
    """At the edge rate 1: strings are boundary strings or quantities, enums miss, lists
    are empty."""
    strings = set(BOUNDARY_STRINGS + QUANTITIES)
    for seed in range(50):
        got = value(OBJ, random.Random(seed), knobs=ALWAYS)
        assert got["name"] in strings
        assert got.get("mode") not in ("A", "B")
        assert got.get("items", []) == []


def test_boundary_strings_cover_the_name_limits() -> None:
    """63/64 (DNS label) and 253/254 (subdomain) lengths, empty, unicode and control
    characters are all among the boundary strings; quantities at their limits too."""
    lengths = {len(s) for s in BOUNDARY_STRINGS}
    assert {0, 1, 63, 64, 253, 254} <= lengths
    assert any(not s.isascii() for s in BOUNDARY_STRINGS)
    assert any("\x00" in s for s in BOUNDARY_STRINGS)
    assert {"0", "-1", "1e400", "9999999Ti", "1.5"} <= set(QUANTITIES)


def test_required_dropped_unknown_added_wrong_typed_and_huge() -> None:
    """Each knob at 1 does what it says."""
    rng = random.Random(1)
    dropped = value(OBJ, rng, knobs=Knobs(drop_required=1.0, edge=0.0))
    assert "name" not in dropped
    extra = value({"type": "object"}, rng, knobs=Knobs(unknown_field=1.0, wrong_type=0.0))
    assert UNKNOWN_FIELD in extra
    wrong = value({"type": "integer"}, rng, knobs=Knobs(wrong_type=1.0))
    assert wrong in WRONG_TYPES
    huge = value({"type": "array", "items": {"type": "string"}}, rng, knobs=Knobs(huge_list=1.0))
    assert len(huge) == HUGE_LIST


def test_depth_is_bounded() -> None:
    """A self-similar schema stops at max_depth."""
    deep: dict[str, Any] = {"type": "object", "required": ["child"], "properties": {}}
    deep["properties"]["child"] = deep
    got = value(deep, random.Random(3), knobs=Knobs(max_depth=4, drop_required=0.0))
    assert json.dumps(got).count("child") <= 4


def test_every_served_kind_round_robin_and_replayable() -> None:
    """Objects cover every CRD's kind in turn, and object i is the same alone or in a run."""
    kinds = load_kinds()
    assert {k.kind for k in kinds} >= {"VirtualMachine", "VirtualMachineInstance"}
    run = list(cases(42, 2 * len(kinds), kinds))
    assert [c.kind for c in run[: len(kinds)]] == kinds
    assert case(42, 5, kinds).body == run[5].body
    assert all(c.body["apiVersion"] == c.kind.api_version for c in run)


def test_tamed_vm_is_halted_and_sets_have_no_replicas() -> None:
    """Stored VMs are Halted whatever the fuzzer said, replica counts are 0."""
    kinds = {k.kind: k for k in load_kinds()}
    vm = case(1, 0, [kinds["VirtualMachine"]])
    vm.body["spec"] = {"running": True, "runStrategy": "Always"}
    assert tamed(vm).body["spec"] == {"runStrategy": "Halted"}
    pool = case(1, 0, [kinds["VirtualMachinePool"]])
    pool.body["spec"] = {"replicas": 9}
    assert pick_stored([pool], kinds={"VirtualMachinePool": 1})[0].body["spec"] == {"replicas": 0}


def test_judge() -> None:
    """2xx accepted; 5xx a server error; 4xx refused when a field is named, else a finding."""
    named = json.dumps({"kind": "Status", "message": "spec.domain.cpu.cores: must be >= 1"})
    causes = json.dumps(
        {"kind": "Status", "message": "invalid", "details": {"causes": [{"field": "spec.x"}]}}
    )
    bare = json.dumps({"kind": "Status", "message": "something went wrong"})
    assert judge(201, "{}").outcome is Outcome.ACCEPTED
    assert judge(400, named).outcome is Outcome.REFUSED
    assert judge(422, causes).outcome is Outcome.REFUSED
    assert judge(400, bare).outcome is Outcome.REFUSED_UNNAMED
    assert judge(500, named).outcome is Outcome.SERVER_ERROR


def test_has_status() -> None:
    """A phase, a condition or a printable status counts; an empty status does not."""
    assert has_status({"status": {"phase": "Pending"}})
    assert has_status({"status": {"conditions": [{"type": "Ready"}]}})
    assert has_status({"status": {"printableStatus": "Stopped"}})
    assert has_status({"status": {"replicas": 0, "labelSelector": "app=fz"}})
    assert not has_status({"status": {}})
    assert not has_status({})


def test_perturbed_bases_keep_the_rest_of_a_valid_spec() -> None:
    """Half a run perturbs a valid base: one to three paths change, the rest stays."""
    kinds = {k.kind: k for k in load_kinds()}
    vm = kinds["VirtualMachine"]
    spec_schema = vm.schema["properties"]["spec"]
    changed = 0
    for seed in range(40):
        got = perturbed("VirtualMachine", spec_schema, random.Random(seed), knobs=Knobs())
        assert got is not None
        changed += got != SPECS["VirtualMachine"]
    assert changed >= 30
    assert perturbed("CDIConfig", {}, random.Random(1), knobs=Knobs()) is None
    assert SPECS["VirtualMachine"]["runStrategy"] == "Halted"  # the base is never mutated


def test_random_path_reaches_into_lists() -> None:
    """A walk through an array property sets a value inside its first item."""
    schema = {
        "properties": {
            "disks": {"type": "array", "items": {"properties": {"name": {"type": "string"}}}}
        }
    }
    node: dict[str, Any] = {}
    for seed in range(20):
        set_at_random_path(node, schema, random.Random(seed), knobs=NEVER)
    assert isinstance(node["disks"], list)


def test_regression_cases_are_vms_of_served_kinds() -> None:
    """Every kept regression body maps to a served kind and has a unique name."""
    found = regression_cases(load_kinds())
    assert found
    assert len({c.name for c in found}) == len(found)
    assert all(c.body["apiVersion"] == c.kind.api_version for c in found)
