"""Whole objects for every kind the installed CRDs serve (manifests/base/crd-*.yaml), from a
seed: object `i` of a run depends only on (seed, i), so one object replays alone."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.fuzz.bases import perturbed
from tests.fuzz.values import BOUNDARY_STRINGS, Knobs, value

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "manifests" / "base"
# Top-level properties the API server sets or ignores on create.
NOT_GENERATED = frozenset({"apiVersion", "kind", "metadata", "status"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Kind:
    """One served kind: where to POST it and its schema."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    schema: Mapping[str, Any]

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def path(self, namespace: str) -> str:
        """The collection's URL path."""
        scope = f"namespaces/{namespace}/" if self.namespaced else ""
        return f"/apis/{self.group}/{self.version}/{scope}{self.plural}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """Object number `index` of the run with `seed`."""

    seed: int
    index: int
    kind: Kind
    body: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    def __str__(self) -> str:
        return f"FUZZ_SEED={self.seed} #{self.index} {self.kind.kind}/{self.name}"


def load_kinds(crd_dir: Path = CRD_DIR) -> list[Kind]:
    """Every served version of every CRD in `crd_dir`, sorted by kind."""
    kinds = []
    for path in sorted(crd_dir.glob("crd-*.yaml")):
        crd = yaml.safe_load(path.read_text())
        spec = crd["spec"]
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            kinds.append(
                Kind(
                    group=spec["group"],
                    version=version["name"],
                    plural=spec["names"]["plural"],
                    kind=spec["names"]["kind"],
                    namespaced=spec["scope"] == "Namespaced",
                    schema=version["schema"]["openAPIV3Schema"],
                )
            )
    return sorted(kinds, key=lambda k: (k.kind, k.version))


def case(seed: int, index: int, kinds: list[Kind], *, knobs: Knobs | None = None) -> Case:
    """Object `index` of the run `seed`: its kind round-robin, its body from its own rng."""
    rng = random.Random(f"{seed}:{index}")
    kind = kinds[index % len(kinds)]
    knobs = knobs or Knobs()
    body: dict[str, Any] = {"apiVersion": kind.api_version, "kind": kind.kind}
    name = f"fz-{seed % 100000}-{index}"
    if rng.random() < knobs.edge / 3:
        name = rng.choice(BOUNDARY_STRINGS)
    body["metadata"] = {"name": name}
    props = kind.schema.get("properties") or {}
    spec = perturbed(kind.kind, props.get("spec") or {}, rng, knobs=knobs)
    if spec is not None and rng.random() < 0.5:
        body["spec"] = spec
        return Case(seed=seed, index=index, kind=kind, body=body)
    for prop, sub in props.items():
        if prop not in NOT_GENERATED and rng.random() < 0.95:
            body[prop] = value(sub, rng, knobs=knobs, depth=1)
    return Case(seed=seed, index=index, kind=kind, body=body)


def cases(
    seed: int, count: int, kinds: list[Kind], *, knobs: Knobs | None = None
) -> Iterator[Case]:
    """Objects 0..count-1 of the run `seed`."""
    for index in range(count):
        yield case(seed, index, kinds, knobs=knobs)
