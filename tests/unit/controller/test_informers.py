"""The VMI decoder reuses the cached spec while metadata.generation is unchanged and
parses it again when the generation (a spec change) or the UID (a new object) moves."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.informers import SpecReusingDecoder
from shared.kube import Store
from shared.model import VirtualMachineInstance
from tests.unit.controller.builders import vmi_dict


def wire(generation: int | None, *, uid: str = "uid-1", memory: str = "64Mi") -> dict[str, Any]:
    raw = copy.deepcopy(vmi_dict())
    raw["metadata"].update(uid=uid, resourceVersion="5", managedFields=[{"manager": "x"}])
    if generation is not None:
        raw["metadata"]["generation"] = generation
    raw["spec"]["domain"]["memory"] = {"guest": memory}
    raw["status"] = {"phase": "Scheduling"}
    return raw


def decoder_with(cached: VirtualMachineInstance) -> SpecReusingDecoder[VirtualMachineInstance]:
    store: Store[VirtualMachineInstance] = Store()
    store.upsert(cached.key, cached)
    decode = SpecReusingDecoder(VirtualMachineInstance)
    decode.attach(store)
    return decode


def test_same_generation_reuses_the_cached_spec_and_decodes_the_rest() -> None:
    """Equal generation and UID: the spec object is the cached one, status and metadata new,
    and the result equals a full parse (managedFields dropped either way)."""
    cached = VirtualMachineInstance.from_dict(wire(1))
    raw = wire(1)
    raw["status"] = {"phase": "Scheduled", "nodeName": "n1"}
    raw["metadata"]["resourceVersion"] = "6"
    full = VirtualMachineInstance.from_dict({**copy.deepcopy(raw), "metadata": {
        k: v for k, v in raw["metadata"].items() if k != "managedFields"
    }})  # fmt: skip
    got = decoder_with(cached)(raw)
    assert got.spec is cached.spec
    assert got == full
    assert got.metadata.resource_version == "6" and got.status.node_name == "n1"


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        pytest.param(wire(2, memory="128Mi"), "generation moved", id="new-generation"),
        pytest.param(wire(1, uid="uid-2", memory="128Mi"), "another object", id="new-uid"),
        pytest.param(wire(None, memory="128Mi"), "no generation", id="no-generation"),
    ],
)
def test_spec_is_parsed_again_when_it_may_differ(raw: dict[str, Any], why: str) -> None:
    """A moved generation, a new UID or a missing generation means a full parse."""
    cached = VirtualMachineInstance.from_dict(wire(1))
    got = decoder_with(cached)(raw)
    assert got.spec is not cached.spec, why
    assert got.spec.domain.memory is not None and got.spec.domain.memory.guest == "128Mi"


def test_without_a_cached_object_it_parses_everything() -> None:
    """The first sight of an object is a plain parse."""
    decode = SpecReusingDecoder(VirtualMachineInstance)
    got = decode(wire(1))
    assert got.status.phase == "Scheduling"
    assert "managedFields" not in got.metadata.extra


def test_the_event_of_our_own_write_is_not_decoded() -> None:
    """The watch event carrying the version our last write returned yields that object."""
    ours = VirtualMachineInstance.from_dict(wire(1))
    decode = SpecReusingDecoder(VirtualMachineInstance, written={ours.key: ours}.get)
    assert decode(wire(1)) is ours
    newer = wire(1)
    newer["metadata"]["resourceVersion"] = "6"
    assert decode(newer) is not ours
