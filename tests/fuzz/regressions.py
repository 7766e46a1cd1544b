"""Objects the fuzzer once found a bug with, sent by every run (literal bodies: a seed's
objects change whenever the generator does)."""

from __future__ import annotations

from typing import Any

from tests.fuzz.objects import Case, Kind


def _vm(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": name}
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": meta,
        "spec": spec,
    }


# The VM mutating webhook crashed (500) on wrong-typed values before the schema check.
BODIES: tuple[dict[str, Any], ...] = (
    _vm("fz-reg-template-float", {"instancetype": {"inferFromVolume": "v"}, "template": 1.5}),
    _vm("fz-reg-template-str", {"preference": {"inferFromVolume": "v"}, "template": "s"}),
    _vm("fz-reg-preference-list", {"preference": [1, "a"], "template": {}}),
)


def regression_cases(kinds: list[Kind]) -> list[Case]:
    """The regression bodies as cases (index -1, -2, …; seed 0)."""
    by_kind = {k.kind: k for k in kinds}
    return [
        Case(seed=0, index=-(i + 1), kind=by_kind[body["kind"]], body=body)
        for i, body in enumerate(BODIES)
    ]
